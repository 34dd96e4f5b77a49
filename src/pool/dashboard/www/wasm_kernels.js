// The WebAssembly kernels (src/pool/wasm/: the native worker's C++ matmul
// and render code built for wasm32) behind plain functions. No DOM: the
// page's Web Worker (wasm_worker.js) and the node test
// (src/pool/wasm/run_kernels.mjs) both load it.
//
// The module is built against WASI's libc, whose only imports are for
// printing to stdout/stderr (a failed assertion's message); they fail here.
// A trap (an abort) leaves the instance unusable: the caller makes a new one.
const WASI_EBADF = 8;
const wasi = { fd_close: () => WASI_EBADF, fd_seek: () => WASI_EBADF, fd_write: () => WASI_EBADF };

const splitSeed = (seed) => {
  const s = BigInt(seed);
  return [Number(s & 0xffffffffn), Number((s >> 32n) & 0xffffffffn)];
};

export async function loadKernels(wasmBytes) {
  const { instance } = await WebAssembly.instantiate(wasmBytes, { wasi_snapshot_preview1: wasi });
  const x = instance.exports;
  x._initialize();
  const bytes = (ptr, len) => new Uint8Array(x.memory.buffer, ptr, len).slice();  // a copy: memory may grow
  const error = () => {
    const p = x.rs_error();
    const mem = new Uint8Array(x.memory.buffer);
    let end = p;
    while (mem[end] !== 0 && end - p < 1000) end++;
    return new TextDecoder().decode(mem.subarray(p, end));
  };
  return {
    // The float32 tile (rows x cols, row-major, little-endian bytes) of a seeded matmul job.
    matmulSeeded(seed, k, r0, rows, c0, cols) {
      const [lo, hi] = splitSeed(seed);
      const p = x.rs_matmul_seeded(lo, hi, k, r0, rows, c0, cols);
      if (!p) throw new Error(error());
      return bytes(p, x.rs_out_len());
    },
    // Parses and prepares a scene's JSON text (bytes); later renderTile calls use it.
    loadScene(sceneBytes) {
      const p = x.rs_alloc(sceneBytes.length);
      if (!p) throw new Error("the scene does not fit in this browser's memory");
      new Uint8Array(x.memory.buffer, p, sceneBytes.length).set(sceneBytes);
      const ok = x.rs_scene_load(p, sceneBytes.length);
      x.rs_free(p);
      if (!ok) throw new Error(error());
    },
    // The tile wire bytes (render/tile_wire.hpp, "tile.bin") of tile `index` of a render job's spec.
    renderTile(spec, index) {
      const [lo, hi] = splitSeed(spec.seed);
      const p = x.rs_render_tile(spec.width, spec.height, spec.spp, spec.max_depth, lo, hi, spec.tile, spec.overlap, index);
      if (!p) throw new Error(error());
      return bytes(p, x.rs_out_len());
    },
  };
}
