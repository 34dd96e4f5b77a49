// The browser worker's WebAssembly backend (docs/BROWSER-WORKERS.md,
// "WebAssembly fallback"), for a browser without WebGPU: the native worker's
// C++ kernels built for wasm32 (src/pool/wasm/), run in a Web Worker
// (wasm_worker.js). Same interface as join.js's WebGPU backend: matmul(tile)
// returns the float32 tile's bytes, render(tile) the tile wire bytes.
export async function wasmBackend() {
  const worker = new Worker(new URL("wasm_worker.js", import.meta.url), { type: "module" });
  const waiting = new Map();
  let next = 0;
  worker.onmessage = (e) => {
    const w = waiting.get(e.data.id);
    waiting.delete(e.data.id);
    if (w) e.data.ok ? w.resolve(e.data.result) : w.reject(new Error(e.data.error));
  };
  worker.onerror = (e) => {
    for (const w of waiting.values()) w.reject(new Error(e.message || "the WebAssembly worker failed"));
    waiting.clear();
  };
  const call = (op, args) => new Promise((resolve, reject) => {
    const id = next++;
    waiting.set(id, { resolve, reject });
    worker.postMessage({ id, op, args });
  });
  await call("load");  // fetched and compiled now: a coordinator without kernels is known before joining
  const cores = navigator.hardwareConcurrency ? `, ${navigator.hardwareConcurrency} cores` : "";
  return {
    kind: "wasm",
    name: `wasm (WebAssembly on the CPU, one thread${cores})`,
    // {seed, k, r0, rows, c0, cols} of a seeded job -> the tile's float32 bytes
    matmul: (tile) => call("matmul", tile),
    // {job, spec, index, scene (the scene's JSON bytes)} -> tile.bin bytes
    render: (tile) => call("render", tile),
  };
}
