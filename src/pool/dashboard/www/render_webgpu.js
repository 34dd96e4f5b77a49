// Render tiles in the browser worker with WebGPU (docs/BROWSER-WORKERS.md):
// the job's scene file (docs/SCENES.md) parsed and prepared as
// src/pool/render/scene_parser.cpp, scene.cpp and bvh.cpp do, in float32
// arithmetic (Math.fround after every operation, as the C++ rounds), traced
// by the WGSL port of the path tracer (render_webgpu.wgsl.js), tone mapped as
// render.cpp tone_map, and returned as the native worker returns it: a
// tile.bin in the tile wire format (render/tile_wire.hpp) holding a PNG.
import { TRACER_WGSL } from "./render_webgpu.wgsl.js";

const f = Math.fround;
const add = (a, b) => [f(a[0] + b[0]), f(a[1] + b[1]), f(a[2] + b[2])];
const sub = (a, b) => [f(a[0] - b[0]), f(a[1] - b[1]), f(a[2] - b[2])];
const scale = (a, s) => [f(a[0] * s), f(a[1] * s), f(a[2] * s)];
const dot = (a, b) => f(f(f(a[0] * b[0]) + f(a[1] * b[1])) + f(a[2] * b[2]));
const cross = (a, b) => [f(f(a[1] * b[2]) - f(a[2] * b[1])), f(f(a[2] * b[0]) - f(a[0] * b[2])),
                         f(f(a[0] * b[1]) - f(a[1] * b[0]))];
const length = (a) => f(Math.sqrt(dot(a, a)));
const normalize = (a) => scale(a, f(1 / f(Math.sqrt(dot(a, a)))));

const KINDS = { diffuse: 0, mirror: 1, glass: 2, emissive: 3 };
const MAX_COORD = 1e6, LEAF = 4, SAH_DEPTH = 32, BINS = 16;

// --- The scene file (scene_parser.cpp). The coordinator parsed it at submit; this checks what the tracer relies on.
function num(v, path, lo, hi, fallback) {
  if (v === undefined && fallback !== undefined) return f(fallback);
  if (typeof v !== "number" || !Number.isFinite(v) || v < lo || v > hi) throw new Error(path + ": must be a number in [" + lo + ", " + hi + "]");
  return f(v);
}
function vec(v, path, lo, hi, fallback) {
  if (v === undefined && fallback !== undefined) return fallback.map(f);
  if (!Array.isArray(v) || v.length !== 3) throw new Error(path + ": must be an array of 3 numbers");
  return v.map((x) => num(x, path, lo, hi));
}

export function parseScene(text) {
  const root = JSON.parse(text);
  if (!root || typeof root !== "object" || !root.camera || !root.materials || !Array.isArray(root.objects))
    throw new Error("scene: needs camera, materials and objects");
  const c = root.camera;
  const camera = { position: vec(c.position, "camera.position", -MAX_COORD, MAX_COORD),
                   look_at: vec(c.look_at, "camera.look_at", -MAX_COORD, MAX_COORD),
                   up: vec(c.up, "camera.up", -MAX_COORD, MAX_COORD, [0, 1, 0]), fov: num(c.fov, "camera.fov", 0, 179, 40),
                   aperture: num(c.aperture, "camera.aperture", 0, 1000, 0),
                   focus: num(c.focus_distance, "camera.focus_distance", 0, 2 * MAX_COORD, 0) };
  let background = [[0, 0, 0], [0, 0, 0]];  // top, bottom
  if (Array.isArray(root.background)) {
    const b = vec(root.background, "background", 0, 1000);
    background = [b, b];
  } else if (root.background) {
    background = [vec(root.background.top, "background.top", 0, 1000), vec(root.background.bottom, "background.bottom", 0, 1000)];
  }
  const materials = [], ids = new Map();
  for (const [name, m] of Object.entries(root.materials)) {
    if (!m || !(m.type in KINDS)) throw new Error("materials." + name.slice(0, 64) + ": unknown type");
    const kind = KINDS[m.type];
    const color = vec(m.color, "materials.color", 0, 1, kind === 0 ? [0.8, 0.8, 0.8] : kind === 1 ? [0.95, 0.95, 0.95] : [1, 1, 1]);
    ids.set(name, materials.length);
    materials.push({ kind, color, ior: num(m.ior, "ior", 1, 4, 1.5), strength: num(m.strength, "strength", 0, 1e6, 1) });
  }
  const spheres = [], planes = [], triangles = [];
  root.objects.forEach((o, i) => {
    const path = "objects[" + i + "]";
    if (!o || !ids.has(o.material)) throw new Error(path + ": no such material");
    const material = ids.get(o.material);
    if (o.type === "sphere") {
      spheres.push({ center: vec(o.center, path + ".center", -MAX_COORD, MAX_COORD),
                     radius: num(o.radius, path + ".radius", Number.MIN_VALUE, MAX_COORD), material });
    } else if (o.type === "plane") {
      const n = vec(o.normal, path + ".normal", -MAX_COORD, MAX_COORD);
      if (!(length(n) > 1e-6)) throw new Error(path + ".normal: must not be zero");
      planes.push({ point: vec(o.point, path + ".point", -MAX_COORD, MAX_COORD), normal: normalize(n), material });
    } else if (o.type === "mesh") {
      const t = vec(o.translate, path + ".translate", -MAX_COORD, MAX_COORD, [0, 0, 0]);
      const s = num(o.scale, path + ".scale", Number.MIN_VALUE, MAX_COORD, 1);
      const vs = o.vertices, is = o.indices;
      if (!Array.isArray(vs) || !Array.isArray(is) || vs.length % 3 || is.length % 3) throw new Error(path + ": bad mesh");
      const vert = (k) => {
        if (!Number.isInteger(k) || k < 0 || 3 * k >= vs.length) throw new Error(path + ".indices: out of range");
        return [0, 1, 2].map((a) => f(vs[3 * k + a] * s + t[a]));  // in double, as the C++, then to float
      };
      for (let j = 0; j < is.length; j += 3) triangles.push({ a: vert(is[j]), b: vert(is[j + 1]), c: vert(is[j + 2]), material });
    } else {
      throw new Error(path + ".type: must be sphere, plane or mesh");
    }
  });
  const exposure = num(root.exposure, "exposure", Number.MIN_VALUE, 1000, 1);
  const lights = [];
  spheres.forEach((s, i) => { if (materials[s.material].kind === KINDS.emissive) lights.push(i); });
  return { camera, background, exposure, materials, spheres, planes, triangles, lights, bvh: buildBvh(spheres, triangles) };
}

// --- The BVH (bvh.cpp): binned SAH to depth 32, then median splits, at most 4 primitives a leaf.
const emptyBox = () => ({ lo: [1e30, 1e30, 1e30].map(f), hi: [-1e30, -1e30, -1e30].map(f) });
function grow(box, lo, hi) {
  for (let a = 0; a < 3; a++) {
    if (!(box.lo[a] < lo[a])) box.lo[a] = lo[a];
    if (!(box.hi[a] > hi[a])) box.hi[a] = hi[a];
  }
}
function area(b) {
  if (b.lo[0] > b.hi[0]) return 0;
  const e = sub(b.hi, b.lo);
  return f(2 * f(f(f(e[0] * e[1]) + f(e[1] * e[2])) + f(e[2] * e[0])));
}
function buildBvh(spheres, triangles) {
  const prims = [];
  for (const s of spheres) {
    const r = [s.radius, s.radius, s.radius];
    const box = emptyBox();
    grow(box, sub(s.center, r), sub(s.center, r));
    grow(box, add(s.center, r), add(s.center, r));
    prims.push({ box, centroid: s.center });
  }
  for (const t of triangles) {
    const box = emptyBox();
    for (const p of [t.a, t.b, t.c]) grow(box, p, p);
    prims.push({ box, centroid: scale(add(add(t.a, t.b), t.c), f(1 / 3)) });
  }
  const refs = prims.map((_, i) => i), nodes = [];
  if (prims.length === 0) return { nodes, refs };
  const binOf = (c, lo, sc) => { const b = Math.trunc(f(f(c - lo) * sc)); return b < 0 ? 0 : b >= BINS ? BINS - 1 : b; };
  const build = (node, first, count, depth) => {
    const bounds = emptyBox(), cents = emptyBox();
    for (let i = first; i < first + count; i++) {
      const p = prims[refs[i]];
      grow(bounds, p.box.lo, p.box.hi);
      grow(cents, p.centroid, p.centroid);
    }
    Object.assign(nodes[node], { lo: bounds.lo, hi: bounds.hi, first, count });
    if (count <= LEAF) return;
    let mid = 0;
    if (depth < SAH_DEPTH) {
      let best = f(count * area(bounds)), bestAxis = -1, bestBin = 0;
      for (let axis = 0; axis < 3; axis++) {
        const lo = cents.lo[axis], hi = cents.hi[axis];
        if (!(hi > lo)) continue;
        const sc = f(BINS / f(hi - lo));
        const boxes = Array.from({ length: BINS }, emptyBox), counts = new Array(BINS).fill(0);
        for (let i = first; i < first + count; i++) {
          const p = prims[refs[i]], b = binOf(p.centroid[axis], lo, sc);
          grow(boxes[b], p.box.lo, p.box.hi);
          counts[b] += 1;
        }
        const right = new Array(BINS).fill(0);
        let acc = emptyBox(), n = 0;
        for (let b = BINS - 1; b > 0; b--) { grow(acc, boxes[b].lo, boxes[b].hi); n += counts[b]; right[b] = f(n * area(acc)); }
        acc = emptyBox(); n = 0;
        for (let b = 0; b < BINS - 1; b++) {
          grow(acc, boxes[b].lo, boxes[b].hi);
          n += counts[b];
          if (n === 0 || n === count) continue;
          const cost = f(f(n * area(acc)) + right[b + 1]);
          if (cost < best) { best = cost; bestAxis = axis; bestBin = b; }
        }
      }
      if (bestAxis >= 0) {
        const lo = cents.lo[bestAxis], sc = f(BINS / f(cents.hi[bestAxis] - lo));
        let i = first, j = first + count;
        while (i < j) {
          if (binOf(prims[refs[i]].centroid[bestAxis], lo, sc) <= bestBin) i++;
          else { j--; [refs[i], refs[j]] = [refs[j], refs[i]]; }
        }
        mid = i - first;
      }
    }
    if (mid === 0) {  // half on each side along the widest centroid axis, ties by reference
      const e = sub(cents.hi, cents.lo);
      const axis = e[0] >= e[1] && e[0] >= e[2] ? 0 : e[1] >= e[2] ? 1 : 2;
      const part = refs.slice(first, first + count).sort((a, b) =>
        prims[a].centroid[axis] - prims[b].centroid[axis] || a - b);
      refs.splice(first, count, ...part);
      mid = count >> 1;
    }
    const left = nodes.length;
    nodes.push({}, {});
    Object.assign(nodes[node], { first: left, count: 0 });
    build(left, first, mid, depth + 1);
    build(left + 1, first + mid, count - mid, depth + 1);
  };
  nodes.push({});
  build(0, 0, prims.length, 1);
  return { nodes, refs };
}

// --- The camera frame for the whole image (scene.cpp make_camera_frame).
function cameraFrame(c, width, height) {
  const aspect = f(width / height);
  const halfH = f(Math.tan(f(f(c.fov * f(Math.PI)) / 360)));
  const halfW = f(aspect * halfH);
  const w = normalize(sub(c.position, c.look_at));
  const u = normalize(cross(c.up, w));
  const v = cross(w, u);
  const focus = c.focus > 0 ? c.focus : length(sub(c.position, c.look_at));
  return { origin: c.position, horizontal: scale(u, f(f(2 * halfW) * focus)), vertical: scale(v, f(f(2 * halfH) * focus)),
           lowerLeft: sub(sub(sub(c.position, scale(u, f(halfW * focus))), scale(v, f(halfH * focus))), scale(w, focus)),
           u, v, lens: f(c.aperture / 2) };
}

// The scene as the shader's words (layout: render_webgpu.wgsl.js) and their offsets.
function packScene(scene, width, height) {
  const words = [], off = {};
  const F = new Float32Array(1), U = new Uint32Array(F.buffer);
  const fw = (x) => { F[0] = x; words.push(U[0]); };
  const iw = (x) => words.push(x >>> 0);
  const v = (a) => a.forEach(fw);
  off.mat = words.length;
  for (const m of scene.materials) { iw(m.kind); v(m.color); fw(m.ior); fw(m.strength); }
  off.sph = words.length;
  for (const s of scene.spheres) { v(s.center); fw(s.radius); iw(s.material); }
  off.pl = words.length;
  for (const p of scene.planes) { v(p.point); v(p.normal); iw(p.material); }
  off.tri = words.length;
  for (const t of scene.triangles) { v(t.a); v(t.b); v(t.c); iw(t.material); }
  off.node = words.length;
  for (const n of scene.bvh.nodes) { v(n.lo); iw(n.first); v(n.hi); iw(n.count); }
  off.ref = words.length;
  scene.bvh.refs.forEach(iw);
  off.light = words.length;
  scene.lights.forEach(iw);
  off.cam = words.length;
  const cam = cameraFrame(scene.camera, width, height);
  v(scene.background[0]); v(scene.background[1]);
  for (const k of ["origin", "lowerLeft", "horizontal", "vertical", "u", "v"]) v(cam[k]);
  fw(cam.lens);
  words.push(0);  // never an empty buffer
  return { words: Uint32Array.from(words), off };
}

// --- Tone mapping (render.cpp encode_channel), in float as there.
const POW = f(1 / f(2.4));
function encodeChannel(linear, exposure) {
  const x = f(linear * exposure);
  let m = f(f(x * f(f(f(2.51) * x) + f(0.03))) / f(f(x * f(f(f(2.43) * x) + f(0.59))) + f(0.14)));
  m = m < 0 ? 0 : m > 1 ? 1 : m;
  let s = m <= f(0.0031308) ? f(f(12.92) * m) : f(f(f(1.055) * f(Math.pow(m, POW))) - f(0.055));
  s = s < 0 ? 0 : s > 1 ? 1 : s;
  return Math.floor(f(s * 255) + 0.5);  // lround of a non-negative value
}

// --- PNG (8-bit RGB, filter 0 on every row; zlib by CompressionStream) and the tile wire format.
const CRC = new Uint32Array(256).map((_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c;
});
function crc32(bytes) {
  let c = 0xffffffff;
  for (const b of bytes) c = CRC[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
async function zlib(bytes) {
  const stream = new Blob([bytes]).stream().pipeThrough(new CompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
async function encodePng(w, h, rgb) {
  const raw = new Uint8Array(h * (1 + 3 * w));
  for (let y = 0; y < h; y++) raw.set(rgb.subarray(3 * w * y, 3 * w * (y + 1)), y * (1 + 3 * w) + 1);
  const chunk = (type, data) => {
    const out = new Uint8Array(12 + data.length), view = new DataView(out.buffer);
    view.setUint32(0, data.length);
    out.set(new TextEncoder().encode(type), 4);
    out.set(data, 8);
    view.setUint32(8 + data.length, crc32(out.subarray(4, 8 + data.length)));
    return out;
  };
  const ihdr = new Uint8Array(13), iv = new DataView(ihdr.buffer);
  iv.setUint32(0, w);
  iv.setUint32(4, h);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const parts = [Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", ihdr),
                 chunk("IDAT", await zlib(raw)), chunk("IEND", new Uint8Array(0))];
  const png = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  parts.reduce((at, p) => (png.set(p, at), at + p.length), 0);
  return png;
}
function tileWire(rect, png) {
  const out = new Uint8Array(28 + png.length), view = new DataView(out.buffer);
  out.set([0x52, 0x53, 0x54, 0x4c, 1, 1, 0, 0]);  // "RSTL", version 1, PNG
  [rect.x, rect.y, rect.w, rect.h, png.length].forEach((v, i) => view.setUint32(8 + 4 * i, v, true));
  out.set(png, 28);
  return out;
}

// The tile's rendered rectangle (tiles.cpp split_tiles): its core grown by the overlap, clamped to the image.
function tileRect(spec, index) {
  const cols = Math.ceil(spec.width / spec.tile), tx = index % cols, ty = Math.floor(index / cols);
  const cx = tx * spec.tile, cy = ty * spec.tile;
  const x0 = Math.max(0, cx - spec.overlap), y0 = Math.max(0, cy - spec.overlap);
  const x1 = Math.min(spec.width, cx + Math.min(spec.tile, spec.width - cx) + spec.overlap);
  const y1 = Math.min(spec.height, cy + Math.min(spec.tile, spec.height - cy) + spec.overlap);
  return { x: x0, y: y0, w: x1 - x0, h: y1 - y0 };
}

const pipelines = new WeakMap();  // device -> compute pipeline
let cached = { job: null };  // tiles of one job come in runs: parse and pack its scene once

function specError(spec) {
  for (const k of ["width", "height", "spp", "max_depth", "tile", "overlap"])
    if (!Number.isSafeInteger(spec[k]) || spec[k] < 0) return "render: no " + k;
  if (!Number.isSafeInteger(spec.seed) || spec.seed < 0) return "the seed is too large for this browser worker (at most 2^53)";
  if (spec.width < 1 || spec.height < 1 || spec.width > 16384 || spec.height > 16384 || spec.spp < 1 || spec.spp > 65536 ||
      spec.max_depth < 1 || spec.max_depth > 64 || spec.tile < 16 || spec.tile > 2048 || spec.overlap > Math.min(64, spec.tile / 2))
    return "render: settings out of range";
  return null;
}

// One render task: {stdout, files: [{data, path: "tile.bin"}]} as render_workload.cpp's run() makes them, or {error}.
// `input(job)` answers the worker protocol's "input" request (the job's scene.json).
export async function renderTileWebGPU(device, task, input) {
  try {
    return await renderTile(device, task, input);
  } catch (e) {  // a WebGPU error is this device's, not the task's: the task goes back
    return { error: "render on WebGPU: " + String(e.message || e).slice(0, 200) };
  }
}

async function renderTile(device, task, input) {
  const spec = task.spec || {};
  const bad = specError(spec);
  if (bad) return { error: bad };
  const rect = tileRect(spec, task.shard);
  if (!(task.shard >= 0) || rect.w < 1 || rect.h < 1 || rect.y >= spec.height) return { error: "render: no such tile" };
  const start = performance.now();
  if (cached.job !== task.job) {
    const answer = await input(task.job);
    const file = ((answer.input || {}).files || []).find((x) => x && x.path === "scene.json");
    if (!answer.ok || !file) return { error: "render: the job's scene is missing (" + String(answer.error || "no scene.json") + ")" };
    try {
      const scene = parseScene(new TextDecoder().decode(Uint8Array.from(atob(file.data), (ch) => ch.charCodeAt(0))));
      cached = { job: task.job, scene, packed: packScene(scene, spec.width, spec.height) };
    } catch (e) {
      return { error: "render: " + String(e.message || e).slice(0, 200) };
    }
  }
  const { scene, packed: { words, off } } = cached;

  let pipeline = pipelines.get(device);
  if (!pipeline) {
    const module = device.createShaderModule({ code: TRACER_WGSL });
    pipeline = await device.createComputePipelineAsync({ layout: "auto", compute: { module, entryPoint: "main" } });
    pipelines.set(device, pipeline);
  }
  const sceneBuf = device.createBuffer({ size: words.byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(sceneBuf, 0, words);
  const bytes = rect.w * rect.h * 3 * 4;
  const acc = device.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });  // zeroed
  const params = device.createBuffer({ size: 96, usage: GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST });
  const read = device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const group = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [
    { binding: 0, resource: { buffer: params } }, { binding: 1, resource: { buffer: sceneBuf } },
    { binding: 2, resource: { buffer: acc } }] });
  try {
    // Samples in chunks of about 2^16 pixel-samples a dispatch, so no one dispatch runs long on a slow GPU.
    const perDispatch = Math.max(1, Math.floor(65536 / (rect.w * rect.h)));
    for (let first = 0; first < spec.spp; first += perDispatch) {
      const last = Math.min(spec.spp, first + perDispatch);
      const p = new Int32Array([rect.x, rect.y, rect.w, rect.h, spec.width, spec.height, spec.max_depth, first, last,
                                scene.spheres.length, scene.planes.length, scene.bvh.nodes.length, scene.lights.length,
                                spec.seed % 2 ** 32, Math.floor(spec.seed / 2 ** 32), off.mat, off.sph, off.pl, off.tri,
                                off.node, off.ref, off.light, off.cam, 0]);
      device.queue.writeBuffer(params, 0, p);
      const encoder = device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(Math.ceil(rect.w / 8), Math.ceil(rect.h / 8));
      pass.end();
      if (last === spec.spp) encoder.copyBufferToBuffer(acc, 0, read, 0, bytes);
      device.queue.submit([encoder.finish()]);
      await device.queue.onSubmittedWorkDone();
    }
    await read.mapAsync(GPUMapMode.READ);
    const sums = new Float32Array(read.getMappedRange().slice(0));
    read.unmap();
    const inv = f(1 / spec.spp), rgb = new Uint8Array(sums.length);
    for (let i = 0; i < sums.length; i++) rgb[i] = encodeChannel(f(sums[i] * inv), scene.exposure);
    const wire = tileWire(rect, await encodePng(rect.w, rect.h, rgb));
    const stdout = JSON.stringify({ compute_s: (performance.now() - start) / 1000, device: "webgpu", tile: task.shard }) + "\n";
    return { stdout, files: [{ data: base64(wire), path: "tile.bin" }] };  // the files' keys in the coordinator's order
  } finally {
    for (const b of [sceneBuf, acc, params, read]) b.destroy();
  }
}

function base64(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(s);
}
