#!/usr/bin/env python3
"""The browser worker's WebAssembly kernels against the native CPU worker on this machine (docs/PERFORMANCE.md,
"Browser WebAssembly (issue 19)"). In one run: the same seeded matmul tile and the same render tile, in WebAssembly
under node (src/pool/wasm/run_kernels.mjs: the page's own glue, V8 as in Chromium) and natively (kernel_bench: OpenBLAS
on all cores, render_rect on all cores, as `pool join --cpu` runs them; and on one core, as the page's one Web Worker
runs). Each is the fastest of --reps runs; prints one line per workload and the ratios.

  bench/wasm_bench.py BUILD_DIR [--reps 3]       (BUILD_DIR: a release tree with kernel_bench and kernels.wasm)
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENE = os.path.join(ROOT, "examples", "scenes", "spheres.json")

# A matmul tile of a seeded 1024^3 job in 256 x 256 blocks; render tile 17 (inner, 144 x 144 pixels with its
# overlap) of a 1280 x 720 spheres.json image at 16 spp, split in 128-pixel tiles.
MATMUL = {"seed": 11, "k": 1024, "r0": 256, "rows": 256, "c0": 512, "cols": 256}
RENDER = {"scene": SCENE, "spec": {"width": 1280, "height": 720, "spp": 16, "max_depth": 8, "seed": 1, "tile": 128,
                                   "overlap": 8}, "index": 17}


def times(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return [json.loads(line)["seconds"] for line in out.splitlines() if line.startswith("{")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build_dir")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    wasm = os.path.join(args.build_dir, "src", "pool", "wasm", "kernels.wasm")
    native = os.path.join(args.build_dir, "bench", "kernel_bench")
    for path in (wasm, native):
        if not os.path.exists(path):
            sys.exit("wasm_bench: %s is missing (build the tree: ninja -C %s kernel_bench src/pool/wasm/kernels.wasm)"
                     % (path, args.build_dir))
    with tempfile.TemporaryDirectory(prefix="runsnack-wasm-bench-") as tmp:
        requests = os.path.join(tmp, "requests.json")
        with open(requests, "w") as f:  # node: the same pair `reps` times; the fastest of each counts
            json.dump([{"matmul": MATMUL}, {"render": RENDER}] * args.reps, f)
        w = times(["node", os.path.join(ROOT, "src", "pool", "wasm", "run_kernels.mjs"), wasm, requests, tmp])
        wasm_s = [min(w[0::2]), min(w[1::2])]
        with open(requests, "w") as f:
            json.dump([{"matmul": MATMUL}, {"render": RENDER}], f)
        all_cores = times([native, requests, "--reps", str(args.reps), "--threads", "0"])
        one_core = times([native, requests, "--reps", str(args.reps), "--threads", "1"],
                         env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    flops = 2 * MATMUL["rows"] * MATMUL["cols"] * MATMUL["k"]
    print("cores: %d" % os.cpu_count())
    for i, (name, unit) in enumerate((("matmul tile 256x256x1024", "GFLOP/s"), ("render tile 144x144 at 16 spp", "Mpx*spp/s"))):
        work = flops / 1e9 if i == 0 else 144 * 144 * 16 / 1e6
        print("%-30s wasm %.3f s (%.2f %s)  native all cores %.3f s (%.2f)  native one core %.3f s (%.2f)  "
              "wasm/native: %.3f of the worker, %.3f of one core"
              % (name, wasm_s[i], work / wasm_s[i], unit, all_cores[i], work / all_cores[i], one_core[i],
                 work / one_core[i], all_cores[i] / wasm_s[i], one_core[i] / wasm_s[i]))


if __name__ == "__main__":
    main()
