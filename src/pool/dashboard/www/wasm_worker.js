// The Web Worker that runs the WebAssembly kernels (wasm_kernels.js) for the
// page (wasm_backend.js), so a tile that computes for seconds leaves the
// page free to answer the coordinator's heartbeats and the pause button.
// Messages: {id, op: "load" | "matmul" | "render", args} -> {id, ok, result | error}.
import { loadKernels } from "./wasm_kernels.js";

let kernels = null;
let sceneJob = null;  // whose scene the kernels hold

async function ready() {
  if (!kernels) {
    const res = await fetch("kernels.wasm");
    if (!res.ok) throw new Error("this coordinator serves no WebAssembly kernels (HTTP " + res.status + ")");
    kernels = await loadKernels(await res.arrayBuffer());
    sceneJob = null;
  }
  return kernels;
}

onmessage = async (e) => {
  const { id, op, args } = e.data;
  try {
    const k = await ready();
    let result = null;
    if (op === "matmul") {
      result = k.matmulSeeded(args.seed, args.k, args.r0, args.rows, args.c0, args.cols);
    } else if (op === "render") {
      if (sceneJob !== args.job) {
        sceneJob = null;
        k.loadScene(args.scene);
        sceneJob = args.job;
      }
      result = k.renderTile(args.spec, args.index);
    }
    postMessage({ id, ok: true, result }, result ? [result.buffer] : []);
  } catch (err) {
    if (err instanceof WebAssembly.RuntimeError) kernels = null;  // a trap: a fresh instance for the next task
    postMessage({ id, ok: false, error: String((err && err.message) || err) });
  }
};
