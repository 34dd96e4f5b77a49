// The path tracer (src/pool/render/tracer.hpp, intersect.hpp, rng.hpp) in
// WGSL, for the browser worker's render tiles (render_webgpu.js). A port
// line for line: the same counter-based random numbers (splitmix64, done in
// pairs of u32 since WGSL has no 64-bit integers), the same rejection
// sampling, the same operations in the same order (dot, cross and normalize
// written out rather than WGSL's builtins, min/max as the C++ selects), so a
// pixel differs from the CPU's only where the GPU's division or square root
// rounds differently, which the coordinator's spot check tolerates.
//
// One invocation is one pixel of the rectangle; a dispatch adds samples
// [first, last) to the pixel's running sum in `acc`, as the CUDA kernel's
// launches do, so sums add in the CPU's order.
//
// The scene is one array of u32 words (floats as their bits), laid out by
// packScene in render_webgpu.js: per material kind, r, g, b, ior, strength;
// per sphere cx, cy, cz, radius, material; per plane px, py, pz, nx, ny, nz,
// material; per triangle a, b, c (9), material; per BVH node lo (3), first,
// hi (3), count; then BVH refs, light sphere indices, and the background
// and camera frame.
export const TRACER_WGSL = `
struct Params {
  rect_x: i32, rect_y: i32, rect_w: i32, rect_h: i32,
  width: i32, height: i32, max_depth: i32, first: i32,
  last: i32, num_spheres: i32, num_planes: i32, num_nodes: i32,
  num_lights: i32, seed_lo: u32, seed_hi: u32, off_mat: i32,
  off_sph: i32, off_pl: i32, off_tri: i32, off_node: i32,
  off_ref: i32, off_light: i32, off_cam: i32, pad: i32,
};
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> S: array<u32>;
@group(0) @binding(2) var<storage, read_write> acc: array<f32>;

const FAR: f32 = 1e30;
const TMIN: f32 = 1e-6;
const RAY_OFFSET: f32 = 1e-4;
const STACK: i32 = 64;

fn fl(i: i32) -> f32 { return bitcast<f32>(S[i]); }
fn it(i: i32) -> i32 { return bitcast<i32>(S[i]); }
fn v3(i: i32) -> vec3<f32> { return vec3<f32>(fl(i), fl(i + 1), fl(i + 2)); }

fn min_f(a: f32, b: f32) -> f32 { return select(b, a, a < b); }
fn max_f(a: f32, b: f32) -> f32 { return select(b, a, a > b); }
fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32 { return a.x * b.x + a.y * b.y + a.z * b.z; }
fn cross3(a: vec3<f32>, b: vec3<f32>) -> vec3<f32> {
  return vec3<f32>(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x);
}
fn norm3(a: vec3<f32>) -> vec3<f32> { let inv = 1.0 / sqrt(dot3(a, a)); return a * inv; }
fn max_component(a: vec3<f32>) -> f32 { return max_f(a.x, max_f(a.y, a.z)); }

// --- 64-bit words as (lo, hi).
fn xor64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> { return a ^ b; }
fn add64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let lo = a.x + b.x;
  return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}
fn mul32(a: u32, b: u32) -> vec2<u32> {  // the full 64-bit product
  let a0 = a & 0xffffu; let a1 = a >> 16u; let b0 = b & 0xffffu; let b1 = b >> 16u;
  let p00 = a0 * b0; let p01 = a0 * b1; let p10 = a1 * b0; let p11 = a1 * b1;
  let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  return vec2<u32>((p00 & 0xffffu) | (mid << 16u), p11 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}
fn mul64(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
  let p = mul32(a.x, b.x);
  return vec2<u32>(p.x, p.y + a.x * b.y + a.y * b.x);
}
fn shr64(a: vec2<u32>, n: u32) -> vec2<u32> {  // 0 < n < 32
  return vec2<u32>((a.x >> n) | (a.y << (32u - n)), a.y >> n);
}
fn mix64(z0: vec2<u32>) -> vec2<u32> {
  var z = mul64(xor64(z0, shr64(z0, 30u)), vec2<u32>(0x1ce4e5b9u, 0xbf58476du));
  z = mul64(xor64(z, shr64(z, 27u)), vec2<u32>(0x133111ebu, 0x94d049bbu));
  return xor64(z, shr64(z, 31u));
}

var<private> rng: vec2<u32>;
fn next() -> f32 {
  rng = add64(rng, vec2<u32>(0x7f4a7c15u, 0x9e3779b9u));
  return f32(mix64(rng).y >> 8u) * (1.0 / 16777216.0);
}
fn seed_rng(x: i32, y: i32, sample: i32) {
  var key = mix64(xor64(vec2<u32>(P.seed_lo, P.seed_hi), vec2<u32>(0x52454e44u, 0x52534e4bu)));
  key = mix64(xor64(key, vec2<u32>(bitcast<u32>(y), bitcast<u32>(x))));
  rng = mix64(xor64(key, vec2<u32>(bitcast<u32>(sample), 0u)));
}
fn disk_point() -> vec2<f32> {
  for (var i = 0; i < 64; i++) {
    let a = 2.0 * next() - 1.0;
    let b = 2.0 * next() - 1.0;
    if (a * a + b * b <= 1.0) { return vec2<f32>(a, b); }
  }
  return vec2<f32>(0.0, 0.0);
}
fn circle_point() -> vec2<f32> {
  for (var i = 0; i < 64; i++) {
    let a = 2.0 * next() - 1.0;
    let b = 2.0 * next() - 1.0;
    let r2 = a * a + b * b;
    if (r2 <= 1.0 && r2 > 1e-8) { let inv = 1.0 / sqrt(r2); return vec2<f32>(a * inv, b * inv); }
  }
  return vec2<f32>(1.0, 0.0);
}
struct Basis { t1: vec3<f32>, t2: vec3<f32> };
fn basis(n: vec3<f32>) -> Basis {
  let sgn = select(-1.0, 1.0, n.z >= 0.0);
  let a = -1.0 / (sgn + n.z);
  let b = n.x * n.y * a;
  return Basis(vec3<f32>(1.0 + sgn * n.x * n.x * a, sgn * b, -sgn * n.x), vec3<f32>(b, sgn + n.y * n.y * a, -n.y));
}

// --- Intersection (intersect.hpp).
struct Hit { t: f32, kind: i32, index: i32 };  // kind: 0 none, 1 plane, 2 sphere, 3 triangle

fn hit_sphere(i: i32, o: vec3<f32>, d: vec3<f32>, hit: ptr<function, Hit>) {
  let at = P.off_sph + 5 * i;
  let oc = o - v3(at);
  let r = fl(at + 3);
  let a = dot3(d, d);
  let half_b = dot3(oc, d);
  let c = dot3(oc, oc) - r * r;
  let disc = half_b * half_b - a * c;
  if (disc < 0.0) { return; }
  let root = sqrt(disc);
  var t = (-half_b - root) / a;
  if (t <= TMIN) { t = (-half_b + root) / a; }
  if (t <= TMIN || t >= (*hit).t) { return; }
  *hit = Hit(t, 2, i);
}
fn hit_triangle(i: i32, o: vec3<f32>, d: vec3<f32>, hit: ptr<function, Hit>) {
  let at = P.off_tri + 10 * i;
  let ta = v3(at);
  let e1 = v3(at + 3) - ta;
  let e2 = v3(at + 6) - ta;
  let p = cross3(d, e2);
  let det = dot3(e1, p);
  if (det > -1e-12 && det < 1e-12) { return; }
  let inv = 1.0 / det;
  let s = o - ta;
  let u = dot3(s, p) * inv;
  if (u < 0.0 || u > 1.0) { return; }
  let q = cross3(s, e1);
  let v = dot3(d, q) * inv;
  if (v < 0.0 || u + v > 1.0) { return; }
  let t = dot3(e2, q) * inv;
  if (t <= TMIN || t >= (*hit).t) { return; }
  *hit = Hit(t, 3, i);
}
fn box_entry(node: i32, o: vec3<f32>, inv: vec3<f32>, limit: f32) -> f32 {
  let at = P.off_node + 8 * node;
  let lo = v3(at);
  let hi = v3(at + 4);
  let tx1 = (lo.x - o.x) * inv.x; let tx2 = (hi.x - o.x) * inv.x;
  let ty1 = (lo.y - o.y) * inv.y; let ty2 = (hi.y - o.y) * inv.y;
  let tz1 = (lo.z - o.z) * inv.z; let tz2 = (hi.z - o.z) * inv.z;
  let enter = max_f(max_f(min_f(tx1, tx2), min_f(ty1, ty2)), max_f(min_f(tz1, tz2), 0.0));
  let leave = min_f(min_f(max_f(tx1, tx2), max_f(ty1, ty2)), min_f(max_f(tz1, tz2), limit));
  return select(FAR, enter, enter <= leave);
}
fn intersect(o: vec3<f32>, d: vec3<f32>, t_max: f32) -> Hit {
  var hit = Hit(t_max, 0, -1);
  for (var i = 0; i < P.num_planes; i++) {
    let at = P.off_pl + 7 * i;
    let n = v3(at + 3);
    let denom = dot3(n, d);
    if (denom == 0.0) { continue; }
    let t = dot3(v3(at) - o, n) / denom;
    if (t > TMIN && t < hit.t) { hit = Hit(t, 1, i); }
  }
  if (P.num_nodes == 0) { return hit; }
  let inv = vec3<f32>(1.0 / d.x, 1.0 / d.y, 1.0 / d.z);
  var stack: array<i32, 64>;
  var stack_t: array<f32, 64>;
  var sp = 0;
  if (box_entry(0, o, inv, hit.t) < FAR) { stack[0] = 0; stack_t[0] = 0.0; sp = 1; }
  while (sp > 0) {
    sp -= 1;
    if (stack_t[sp] >= hit.t) { continue; }
    var node = stack[sp];
    loop {
      let at = P.off_node + 8 * node;
      let first = it(at + 3);
      let count = it(at + 7);
      if (count > 0) {
        for (var k = 0; k < count; k++) {
          let pr = it(P.off_ref + first + k);
          if (pr < P.num_spheres) { hit_sphere(pr, o, d, &hit); } else { hit_triangle(pr - P.num_spheres, o, d, &hit); }
        }
        break;
      }
      var near_child = first;
      var far_child = first + 1;
      var t_near = box_entry(near_child, o, inv, hit.t);
      var t_far = box_entry(far_child, o, inv, hit.t);
      if (t_far < t_near) {
        let c = near_child; near_child = far_child; far_child = c;
        let t = t_near; t_near = t_far; t_far = t;
      }
      if (t_near >= FAR) { break; }
      if (t_far < FAR && sp < STACK) { stack[sp] = far_child; stack_t[sp] = t_far; sp += 1; }
      node = near_child;
    }
  }
  return hit;
}
fn hit_normal(hit: Hit, p: vec3<f32>) -> vec3<f32> {
  if (hit.kind == 1) { return v3(P.off_pl + 7 * hit.index + 3); }
  if (hit.kind == 2) {
    let at = P.off_sph + 5 * hit.index;
    return (p - v3(at)) * (1.0 / fl(at + 3));
  }
  let at = P.off_tri + 10 * hit.index;
  let ta = v3(at);
  return norm3(cross3(v3(at + 3) - ta, v3(at + 6) - ta));
}
fn hit_material(hit: Hit) -> i32 {
  if (hit.kind == 1) { return it(P.off_pl + 7 * hit.index + 6); }
  if (hit.kind == 2) { return it(P.off_sph + 5 * hit.index + 4); }
  return it(P.off_tri + 10 * hit.index + 9);
}

// --- Light transport (tracer.hpp).
fn reflect3(d: vec3<f32>, n: vec3<f32>) -> vec3<f32> { return d - n * (2.0 * dot3(d, n)); }
fn background(d: vec3<f32>) -> vec3<f32> {
  let t = 0.5 * (d.y + 1.0);
  return v3(P.off_cam + 3) * (1.0 - t) + v3(P.off_cam) * t;
}
fn sample_light(p: vec3<f32>, n: vec3<f32>) -> vec3<f32> {
  var pick = i32(next() * f32(P.num_lights));
  if (pick >= P.num_lights) { pick = P.num_lights - 1; }
  let li = it(P.off_light + pick);
  let at = P.off_sph + 5 * li;
  let to = v3(at) - p;
  let dist2 = dot3(to, to);
  let radius = fl(at + 3);
  let r2 = radius * radius;
  let u = next();
  let cs = circle_point();
  if (dist2 <= r2) { return vec3<f32>(0.0); }
  let sin2_max = r2 / dist2;
  let cos_max = sqrt(1.0 - sin2_max);
  let one_minus_cos_max = sin2_max / (1.0 + cos_max);
  let cos_t = 1.0 - u * one_minus_cos_max;
  let sin_t = sqrt(max_f(0.0, 1.0 - cos_t * cos_t));
  let w = to * (1.0 / sqrt(dist2));
  let b = basis(w);
  let dir = norm3(b.t1 * (cs.x * sin_t) + b.t2 * (cs.y * sin_t) + w * cos_t);
  let cos_n = dot3(dir, n);
  if (cos_n <= 0.0) { return vec3<f32>(0.0); }
  let shadow = intersect(p, dir, sqrt(dist2));
  if (shadow.kind != 2 || shadow.index != li) { return vec3<f32>(0.0); }
  let m = P.off_mat + 6 * it(at + 4);
  return v3(m + 1) * (fl(m + 5) * cos_n * 2.0 * one_minus_cos_max * f32(P.num_lights));
}
fn trace_path(o0: vec3<f32>, d0: vec3<f32>) -> vec3<f32> {
  var o = o0;
  var d = d0;
  var radiance = vec3<f32>(0.0);
  var throughput = vec3<f32>(1.0);
  var count_sphere_lights = true;
  for (var depth = 0; depth < P.max_depth; depth++) {
    let hit = intersect(o, d, FAR);
    if (hit.kind == 0) { radiance = radiance + throughput * background(d); break; }
    let p = o + d * hit.t;
    let m = P.off_mat + 6 * hit_material(hit);
    let kind = it(m);
    let color = v3(m + 1);
    if (kind == 3) {
      if (count_sphere_lights || hit.kind != 2) { radiance = radiance + throughput * color * fl(m + 5); }
      break;
    }
    let n = hit_normal(hit, p);
    let front = dot3(d, n) < 0.0;
    let nf = select(-n, n, front);
    if (kind == 0) {
      let q = p + nf * RAY_OFFSET;
      if (P.num_lights > 0) { radiance = radiance + throughput * color * sample_light(q, nf); }
      let ab = disk_point();
      let z = sqrt(max_f(0.0, 1.0 - ab.x * ab.x - ab.y * ab.y));
      let b = basis(nf);
      d = norm3(b.t1 * ab.x + b.t2 * ab.y + nf * z);
      o = q;
      throughput = throughput * color;
      count_sphere_lights = P.num_lights == 0;
    } else if (kind == 1) {
      d = norm3(reflect3(d, nf));
      o = p + nf * RAY_OFFSET;
      throughput = throughput * color;
      count_sphere_lights = true;
    } else {
      let ior = fl(m + 4);
      let eta = select(ior, 1.0 / ior, front);
      let cos_i = min_f(-dot3(d, nf), 1.0);
      let sin2_t = eta * eta * (1.0 - cos_i * cos_i);
      var r0 = (1.0 - ior) / (1.0 + ior);
      r0 = r0 * r0;
      let x = 1.0 - cos_i;
      let fresnel = r0 + (1.0 - r0) * (x * x * x * x * x);
      let choice = next();
      if (sin2_t > 1.0 || choice < fresnel) {
        d = norm3(reflect3(d, nf));
        o = p + nf * RAY_OFFSET;
      } else {
        d = norm3(d * eta + nf * (eta * cos_i - sqrt(1.0 - sin2_t)));
        o = p - nf * RAY_OFFSET;
      }
      throughput = throughput * color;
      count_sphere_lights = true;
    }
    if (depth >= 3) {
      var keep = min_f(max_component(throughput), 1.0);
      if (keep < 0.05) { keep = 0.05; }
      if (next() >= keep) { break; }
      throughput = throughput * (1.0 / keep);
    }
  }
  return radiance;
}
fn render_sample(x: i32, y: i32, sample: i32) -> vec3<f32> {
  seed_rng(x, y, sample);
  let jx = next();
  let jy = next();
  let su = (f32(x) + jx) / f32(P.width);
  let sv = 1.0 - (f32(y) + jy) / f32(P.height);
  let c = P.off_cam + 6;
  var origin = v3(c);
  let lens = fl(c + 18);
  if (lens > 0.0) {
    let ab = disk_point();
    origin = origin + v3(c + 12) * (ab.x * lens) + v3(c + 15) * (ab.y * lens);
  }
  let d = norm3(v3(c + 3) + v3(c + 6) * su + v3(c + 9) * sv - origin);
  let l = trace_path(origin, d);
  // NaN (x != x) or a huge value would poison the mean: dropped, as on the CPU.
  if (!(l.x == l.x && l.y == l.y && l.z == l.z) || l.x > 1e30 || l.y > 1e30 || l.z > 1e30) { return vec3<f32>(0.0); }
  return l;
}

@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let col = i32(id.x);
  let row = i32(id.y);
  if (col >= P.rect_w || row >= P.rect_h) { return; }
  let at = 3 * (row * P.rect_w + col);
  var sum = vec3<f32>(acc[at], acc[at + 1], acc[at + 2]);
  for (var k = P.first; k < P.last; k++) { sum = sum + render_sample(P.rect_x + col, P.rect_y + row, k); }
  acc[at] = sum.x; acc[at + 1] = sum.y; acc[at + 2] = sum.z;
}
`;
