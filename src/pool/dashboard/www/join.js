// The browser worker (docs/BROWSER-WORKERS.md): opened as
// /join#<grant>:<secret>, it joins the pool over the /worker WebSocket
// (protocol: src/pool/browser/browser_protocol.hpp), proves the join link
// with an HMAC over the server's challenge (the secret stays in the
// fragment, which a browser never sends), signs with its own Ed25519 key kept
// in IndexedDB (a stable device across visits), and computes with a
// backend: WebGPU (seeded matmul tiles and render tiles, render_webgpu.js, in
// WGSL compute shaders) or, where
// WebGPU is missing, WebAssembly (wasm_backend.js: the native C++ kernels,
// matmul and render), saying why on the page. It claims work only while the
// tab is visible, not paused, and not on a low battery.
import { renderTileWebGPU } from "./render_webgpu.js";
import { wasmBackend } from "./wasm_backend.js";

const $ = (id) => document.getElementById(id);
const enc = new TextEncoder();
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const LOW_BATTERY = 0.2;  // below this, on battery: no claims
// The longest one task may take here (register's device.max_task_seconds):
// the coordinator offers only tiles it expects this device to finish within
// it. A phone (as its browser says) gets less, to stay cool and responsive.
const MOBILE = navigator.userAgentData ? navigator.userAgentData.mobile : /Mobi|Android/i.test(navigator.userAgent);
const MAX_TASK_SECONDS = MOBILE ? 5 : 10;
const OVERTIME = Symbol("overtime");

const ui = { paused: false, done: 0, earned: 0, battery: null };

function show(state, text) {
  $("state").dataset.state = state;
  $("state").textContent = text || state;
}
function fatal(message) {
  show("error");
  $("error").textContent = message;
}

const hex = (bytes) => Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("");
function base64(bytes) {
  const u = new Uint8Array(bytes);
  let s = "";
  for (let i = 0; i < u.length; i += 0x8000) s += String.fromCharCode.apply(null, u.subarray(i, i + 0x8000));
  return btoa(s);
}
async function sha256hex(text) {
  return hex(await crypto.subtle.digest("SHA-256", typeof text === "string" ? enc.encode(text) : text));
}

// --- The device key: Ed25519 in WebCrypto, the private half not extractable, kept in IndexedDB.
function idb(mode, fn) {
  return new Promise((resolve, reject) => {
    const open = indexedDB.open("runsnack-worker", 1);
    open.onupgradeneeded = () => open.result.createObjectStore("keys");
    open.onerror = () => reject(open.error);
    open.onsuccess = () => {
      const tx = open.result.transaction("keys", mode);
      const req = fn(tx.objectStore("keys"));
      tx.oncomplete = () => resolve(req.result);
      tx.onerror = () => reject(tx.error);
    };
  });
}
async function deviceKey() {
  let pair = await idb("readonly", (s) => s.get("device"));
  if (!pair) {
    pair = await crypto.subtle.generateKey({ name: "Ed25519" }, false, ["sign", "verify"]);
    await idb("readwrite", (s) => s.put(pair, "device"));
  }
  return { pair, publicHex: hex(await crypto.subtle.exportKey("raw", pair.publicKey)) };
}
const sign = async (key, text) => hex(await crypto.subtle.sign({ name: "Ed25519" }, key.pair.privateKey, enc.encode(text)));

// The native grant key (crypto/secret.hpp): HKDF-SHA256 of the lower-cased secret.
async function grantKey(secret) {
  const ikm = await crypto.subtle.importKey("raw", enc.encode(secret.toLowerCase()), "HKDF", false, ["deriveBits"]);
  const bits = await crypto.subtle.deriveBits(
    { name: "HKDF", hash: "SHA-256", salt: enc.encode("runsnack grant v1"), info: enc.encode("grant key") }, ikm, 256);
  return crypto.subtle.importKey("raw", bits, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}

// --- One request, one answer, in order.
class Link {
  constructor(url) {
    this.ws = new WebSocket(url);
    this.waiting = [];
    this.closed = new Promise((resolve) => { this.ws.onclose = () => {
      for (const w of this.waiting) w.reject(new Error("connection closed"));
      this.waiting = [];
      resolve();
    }; });
    this.opened = new Promise((resolve, reject) => { this.ws.onopen = resolve; this.ws.onerror = () => reject(new Error("cannot connect")); });
    this.ws.onmessage = (m) => {
      const w = this.waiting.shift();
      if (w) w.resolve(JSON.parse(m.data));
    };
  }
  next() { return new Promise((resolve, reject) => this.waiting.push({ resolve, reject })); }
  call(msg) { const answer = this.next(); this.ws.send(JSON.stringify(msg)); return answer; }
}

// --- Calibration (pool/calibration.hpp): a 64-bit chain, checkpoints in hex.
function calibrate(seed, iterations) {
  const M = (1n << 64n) - 1n;
  let x = 0xcbf29ce484222325n;
  for (const c of enc.encode(seed)) x = ((x ^ BigInt(c)) * 0x100000001b3n) & M;
  const per = iterations / 64, out = [];
  for (let s = 0; s < 64; s++) {
    for (let i = 0; i < per; i++) {
      x ^= x >> 29n;
      x = (x * 0xbf58476d1ce4e5b9n) & M;
      x ^= x >> 32n;
    }
    out.push(x.toString(16).padStart(16, "0"));
  }
  return out;
}

// --- Seeded matrices (pool/matmul/matrix.cpp): entries are multiples of 1/16, products exact in float32.
const M64 = (1n << 64n) - 1n;
function mix(x) {
  x = (x + 0x9e3779b97f4a7c15n) & M64;
  x = ((x ^ (x >> 30n)) * 0xbf58476d1ce4e5b9n) & M64;
  x = ((x ^ (x >> 27n)) * 0x94d049bb133111ebn) & M64;
  return x ^ (x >> 31n);
}
const lineKey = (seed, which, line) =>
  Number(mix(BigInt(seed) ^ mix(BigInt(which.charCodeAt(0))) ^ mix(BigInt(line) + 1n)) & 0xffffffffn);
function seededLines(seed, which, n, first, count) {
  const out = new Float32Array(count * n);
  for (let l = 0; l < count; l++) {
    const key = lineKey(seed, which, first + l);
    for (let p = 0; p < n; p++) {
      const g = p >>> 7, e = p & 127, q = e >>> 5, h = e & 31;
      let x = (key ^ Math.imul((g * 16 + (h >>> 1)) >>> 0, 0x9e3779b9)) >>> 0;
      x ^= x >>> 16; x = Math.imul(x, 0x7feb352d); x ^= x >>> 15; x = Math.imul(x, 0x846ca68b); x ^= x >>> 16; x >>>= 0;
      const half = h & 1 ? x >>> 16 : x & 0xffff;
      out[l * n + p] = (2 * ((half >>> (4 * q)) & 15) - 15) * 0.0625;
    }
  }
  return out;
}

// --- The WGSL kernel: C = A * Bt' for one tile (A's rows, B's columns as rows).
const SHADER = `
struct Dims { rows: u32, cols: u32, k: u32, pad: u32 };
@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> bt: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;
@compute @workgroup_size(8, 8)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  if (id.y >= dims.rows || id.x >= dims.cols) { return; }
  var sum = 0.0;
  for (var t = 0u; t < dims.k; t++) { sum += a[id.y * dims.k + t] * bt[id.x * dims.k + t]; }
  c[id.y * dims.cols + id.x] = sum;
}`;

async function gpuDevice() {
  if (!navigator.gpu) throw new Error("this browser has no WebGPU");
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) throw new Error("no WebGPU adapter (is hardware acceleration off?)");
  const device = await adapter.requestDevice();
  const module = device.createShaderModule({ code: SHADER });
  const pipeline = device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } });
  const info = adapter.info || {};
  return { device, pipeline, name: ["webgpu", info.vendor, info.architecture].filter(Boolean).join(" ").slice(0, 100) };
}

async function multiply(gpu, a, bt, rows, cols, k) {
  const { device, pipeline } = gpu;
  const buffer = (data, usage) => {
    const b = device.createBuffer({ size: Math.max(16, data.byteLength), usage: usage | GPUBufferUsage.COPY_DST });
    device.queue.writeBuffer(b, 0, data);
    return b;
  };
  const dims = buffer(new Uint32Array([rows, cols, k, 0]), GPUBufferUsage.UNIFORM);
  const ab = buffer(a, GPUBufferUsage.STORAGE), bb = buffer(bt, GPUBufferUsage.STORAGE);
  const bytes = rows * cols * 4;
  const out = device.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const read = device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const group = device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [
    { binding: 0, resource: { buffer: dims } }, { binding: 1, resource: { buffer: ab } },
    { binding: 2, resource: { buffer: bb } }, { binding: 3, resource: { buffer: out } }] });
  const enc2 = device.createCommandEncoder();
  const pass = enc2.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, group);
  pass.dispatchWorkgroups(Math.ceil(cols / 8), Math.ceil(rows / 8));
  pass.end();
  enc2.copyBufferToBuffer(out, 0, read, 0, bytes);
  device.queue.submit([enc2.finish()]);
  await read.mapAsync(GPUMapMode.READ);
  const result = read.getMappedRange().slice(0);
  read.unmap();
  for (const b of [dims, ab, bb, out, read]) b.destroy();
  return result;
}

// A backend computes tiles: {kind, name, matmul(tile), render(tile)}, each
// returning the bytes of the file a native worker returns (tile.f32 or
// tile.bin); a workload it lacks is null. A backend may instead run a whole
// task itself (renderTask: the WebGPU path tracer packs the scene for the GPU
// once per job). The WebGPU one:
async function webgpuBackend() {
  const gpu = await gpuDevice();
  return {
    kind: "webgpu",
    name: gpu.name,
    matmul: ({ seed, k, r0, rows, c0, cols }) =>
      multiply(gpu, seededLines(seed, "A", k, r0, rows), seededLines(seed, "B", k, c0, cols), rows, cols, k),
    render: null,
    renderTask: (task, link) => renderTileWebGPU(gpu.device, task, (job) => link.call({ op: "input", job })),
  };
}

// WebGPU where the browser has it, else WebAssembly; `why` says why not WebGPU.
async function chooseBackend() {
  let why;
  try {
    return { backend: await webgpuBackend(), why: null };
  } catch (e) {
    why = String(e.message || e);
  }
  try {
    return { backend: await wasmBackend(), why };
  } catch (e) {
    throw new Error(why + "; and the WebAssembly fallback failed: " + String(e.message || e));
  }
}

const MAX_TILE_BYTES = 256 * 1024 * 1024;  // what a tab may hold for one matmul tile's operands

// A matmul task's tile (workloads/matmul_workload.cpp), or why this page cannot run it.
async function matmulTask(backend, task) {
  const spec = task.spec || {};
  if ((spec.source || "seed") !== "seed") return { error: "this browser worker runs seeded matmul jobs only (not --a/--b files)" };
  const seed = spec.seed === undefined ? 1 : spec.seed;
  if (!Number.isSafeInteger(seed) || seed < 0) return { error: "the seed is too large for this browser worker" };
  const { m, k, p, block } = spec, index = task.shard;
  const colBlocks = Math.ceil(p / block);
  const r0 = Math.floor(index / colBlocks) * block, c0 = (index % colBlocks) * block;
  const rows = Math.min(block, m - r0), cols = Math.min(block, p - c0);
  if ((rows + cols) * k * 4 > MAX_TILE_BYTES) return { error: "this tile is too large for a browser worker" };
  $("tile").textContent = `${index} of ${task.shards} (rows ${r0}..${r0 + rows - 1}, columns ${c0}..${c0 + cols - 1})`;
  const start = performance.now();
  const tile = await backend.matmul({ seed, k, r0, rows, c0, cols });
  const stdout = JSON.stringify({ cols, compute_s: (performance.now() - start) / 1000, prepare_s: 0, rows, tile: index }) + "\n";
  return { stdout, files: [{ data: base64(tile), path: "tile.f32" }] };  // keys in order, as the coordinator dumps them
}

// A render task's tile (workloads/render_workload.cpp); the job's scene comes
// once per job from the coordinator ("input").
const scenes = { job: null, bytes: null };
async function renderTask(backend, task, link) {
  const spec = task.spec || {};
  if (!Number.isSafeInteger(spec.seed) || spec.seed < 0) return { error: "the seed is too large for this browser worker" };
  if (scenes.job !== task.job) {
    const answer = await link.call({ op: "input", job: task.job });
    if (!answer.ok) return { error: "no job input: " + String(answer.error).slice(0, 200) };
    const file = ((answer.input || {}).files || []).find((f) => f.path === "scene.json");
    if (!file) return { error: "the job has no scene.json" };
    scenes.bytes = Uint8Array.from(atob(file.data), (c) => c.charCodeAt(0));
    scenes.job = task.job;
  }
  $("tile").textContent = `${task.shard} of ${task.shards} (render, ${spec.width}x${spec.height}, ${spec.spp} spp)`;
  const start = performance.now();
  const tile = await backend.render({ job: task.job, spec, index: task.shard, scene: scenes.bytes });
  const stdout = JSON.stringify({ compute_s: (performance.now() - start) / 1000, device: backend.kind, tile: task.shard }) + "\n";
  return { stdout, files: [{ data: base64(tile), path: "tile.bin" }] };
}

const WORKLOADS = { matmul: matmulTask, render: renderTask };

// What the coordinator may hand this backend (pool/device_runs.hpp): seeded
// matmul jobs (a page cannot read a job's .npy files) and render jobs.
function runsOf(backend) {
  return [backend.matmul && "matmul-seeded", (backend.render || backend.renderTask) && "render"].filter(Boolean);
}

// One task's result, or why this page cannot run it (handed back as failed).
async function runTask(backend, task, link) {
  if (task.workload === "render" && backend.renderTask) {
    $("tile").textContent = `${task.shard} of ${task.shards} (render)`;
    return backend.renderTask(task, link);
  }
  const run = WORKLOADS[task.workload];
  if (!run || !backend[task.workload])
    return { error: `this browser worker (${backend.kind}) does not run ${String(task.workload).slice(0, 40)} tasks` };
  return run(backend, task, link);
}

// The result message, signed as pool_store_results.cpp result_signing_bytes() (v1: files inline).
async function resultMessage(key, task, out) {
  const text = "runsnack-pool-result-v1\n" + task.id + "\n" + task.attempt + "\n0\n" + (await sha256hex(out.stdout)) + "\n" +
               (await sha256hex(JSON.stringify(out.files)));
  return { op: "result", task: task.id, attempt: task.attempt, exit_code: 0, stdout: base64(enc.encode(out.stdout)),
           files: out.files, signature: await sign(key, text) };
}

function mayClaim() {
  if (ui.paused) return "paused";
  if (document.visibilityState === "hidden") return "hidden";
  if (ui.battery && !ui.battery.charging && ui.battery.level < LOW_BATTERY) return "low battery";
  return null;
}

async function session(backend, key, grant, hmacKey) {
  const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/worker";
  const link = new Link(url);
  await link.opened;
  const challenge = await link.next();
  const signed = "runsnack browser auth v1\n" + challenge.nonce + "\n" + grant + "\n" + key.publicHex;
  const proof = hex(await crypto.subtle.sign("HMAC", hmacKey, enc.encode(signed)));
  const auth = await link.call({ op: "auth", grant, public_key: key.publicHex, proof, signature: await sign(key, signed) });
  if (!auth.ok) throw Object.assign(new Error(auth.error), { fatal: true });
  show("calibrating");
  const reg = await link.call({ op: "register", public_key: key.publicHex, device: { kind: backend.kind, name: backend.name, score: 0, price: 10, runs: runsOf(backend), max_task_seconds: MAX_TASK_SECONDS } });
  if (!reg.ok) throw Object.assign(new Error(reg.error), { fatal: true });
  $("device").textContent = reg.device;
  const cal = await link.call({ op: "calibrated", checkpoints: calibrate(reg.calibrate.seed, reg.calibrate.iterations) });
  if (!cal.ok) throw Object.assign(new Error(cal.error), { fatal: true });
  let lastSent = Date.now();
  for (;;) {
    const why = mayClaim();
    if (why) {
      show(why.replace(" ", "-"), why);
      if (Date.now() - lastSent > 5000) { await link.call({ op: "heartbeat" }); lastSent = Date.now(); }
      await sleep(250);
      continue;
    }
    const claim = await link.call({ op: "claim", max: 1 });
    lastSent = Date.now();
    if (!claim.ok) throw new Error(claim.error);
    const tasks = claim.tasks || (claim.task ? [claim.task] : []);
    if (tasks.length === 0) {
      show("waiting", "waiting for work");
      await sleep(claim.retry_ms || 500);
      continue;
    }
    for (const task of tasks) {
      show("working", "computing");
      const beat = setInterval(() => link.call({ op: "heartbeat" }).catch(() => {}), 5000);
      const failure = (e) => ({ error: "the " + backend.kind + " backend failed: " + String(e.message || e).slice(0, 200) });
      const work = runTask(backend, task, link).catch(failure);
      let timer;
      const overtime = new Promise((r) => { timer = setTimeout(() => r(OVERTIME), MAX_TASK_SECONDS * 1000); });
      let out = await Promise.race([work, overtime]);
      clearTimeout(timer);
      if (out === OVERTIME) {
        // A GPU dispatch or a wasm call cannot be stopped midway: the task goes
        // back to the pool now (its try unspent; this device gets no more of
        // its job) and the late result is dropped when it comes.
        const back = await link.call({ op: "abandon", task: task.id, attempt: task.attempt });
        if (back.ok) show("working", "finishing a task past " + MAX_TASK_SECONDS + " s (handed back)");
        out = await work;
        if (back.ok) out = null;
      }
      clearInterval(beat);
      if (!out) {
        $("tile").textContent = "-";
        continue;
      }
      const answer = out.error
        ? await link.call({ op: "failed", task: task.id, attempt: task.attempt, reason: out.error })
        : await link.call(await resultMessage(key, task, out));
      lastSent = Date.now();
      if (answer.accepted) {
        ui.done += 1;
        ui.earned += Number(answer.paid || 0);
        $("done").textContent = String(ui.done);
        $("earned").textContent = ui.earned.toFixed(6) + " credits";
      }
      $("tile").textContent = "-";
    }
  }
}

async function main() {
  $("pause").addEventListener("click", () => {
    ui.paused = !ui.paused;
    $("pause").textContent = ui.paused ? "Resume" : "Pause";
  });
  const [grant, secret] = location.hash.slice(1).split(":");
  if (!grant || !secret) return fatal("Open this page with the coordinator's browser join link (/join#GRANT:SECRET).");
  // WebCrypto (the key and the link's proof) exists only in a secure context, like WebGPU.
  if (!window.isSecureContext || !crypto.subtle) {
    $("backend").textContent = "nothing: WebGPU and WebCrypto need a secure context";
    return fatal("This page cannot join from " + location.origin + ": browsers give WebCrypto (its key and the join " +
                 "link's proof) and WebGPU only to secure pages. Open this page over https or on localhost " +
                 "(`pool serve --http-tls CERT KEY`, or a TLS reverse proxy).");
  }
  if (navigator.getBattery) navigator.getBattery().then((b) => { ui.battery = b; }).catch(() => {});
  let chosen, key, hmacKey;
  try {
    [chosen, key, hmacKey] = await Promise.all([chooseBackend(), deviceKey(), grantKey(secret)]);
  } catch (e) {
    return fatal(String(e.message || e));
  }
  const backend = chosen.backend;
  $("backend").dataset.kind = backend.kind;
  $("backend").textContent = chosen.why ? `${chosen.why}; running on WebAssembly (the CPU) instead` : backend.name;
  for (let delay = 1000; ; delay = Math.min(delay * 2, 30000)) {
    show("connecting");
    try {
      await session(backend, key, grant, hmacKey);
    } catch (e) {
      if (e.fatal) return fatal(e.message);
      $("error").textContent = "connection lost (" + e.message + "); retrying";
    }
    await sleep(delay);
  }
}

main();
