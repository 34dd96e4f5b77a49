// Runs the WebAssembly kernels under node, through the page's own glue
// (dashboard/www/wasm_kernels.js), for kernels_test.cpp and
// bench/wasm_bench.py:
//
//   node run_kernels.mjs KERNELS.wasm REQUESTS.json OUTDIR
//
// REQUESTS.json is a list of {"matmul": {seed, k, r0, rows, c0, cols}} and
// {"render": {scene: FILE, spec: {width, height, spp, max_depth, seed, tile,
// overlap}, index}}; request i's bytes go to OUTDIR/i.bin (the float32 tile,
// or the tile wire bytes), and one JSON line {"i", "seconds"} each to stdout
// (a render's seconds include loading its scene).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const { loadKernels } = await import(path.join(here, "../dashboard/www/wasm_kernels.js"));

const [wasmPath, requestsPath, outDir] = process.argv.slice(2);
const kernels = await loadKernels(fs.readFileSync(wasmPath));
const requests = JSON.parse(fs.readFileSync(requestsPath, "utf8"));
let loaded = null;
for (const [i, r] of requests.entries()) {
  const start = performance.now();
  let out;
  if (r.matmul) {
    const m = r.matmul;
    out = kernels.matmulSeeded(m.seed, m.k, m.r0, m.rows, m.c0, m.cols);
  } else {
    if (loaded !== r.render.scene) kernels.loadScene(fs.readFileSync(r.render.scene));
    loaded = r.render.scene;
    out = kernels.renderTile(r.render.spec, r.render.index);
  }
  const seconds = (performance.now() - start) / 1000;
  fs.writeFileSync(path.join(outDir, `${i}.bin`), out);
  process.stdout.write(JSON.stringify({ i, seconds }) + "\n");
}
