#!/usr/bin/env python3
"""Throughput of a browser worker (WebGPU, on this machine SwiftShader; or WebAssembly) against a native CPU worker.

  bench/browser_render_bench.py RUNSNACK_BINARY [--worker-binary BIN] [--kind webgpu|wasm]
                                [--workload render|matmul] [--scene FILE] [--width 256] [--height 192]
                                [--spp 8] [--tile 64] [--overlap 8] [--n 512] [--block 64]

--kind wasm opens the page with WebGPU off, so the tab runs the WebAssembly kernels. --workload matmul
submits a seeded `matmul --n N --block B` job instead of a render (figures then in tiles/s, N/B squared
tiles).

One coordinator (`pool serve --http`, RUNSNACK_BINARY: it serves the page) and, in this order:
  1. a render job is submitted, then headless Chromium (tests/browser/worker_check.mjs --honest) opens the
     browser join link: "page open to first task" is from opening the page to the first claim answered with
     a task (launch, key, auth, calibration, claim), and the job runs on the tab alone (cold: its first
     tile includes compiling the WGSL pipeline);
  2. the same job again on the tab alone (warm): the browser's pixels (or tiles) per second;
  3. the tab paused, one native `pool join --cpu` worker (--worker-binary, default RUNSNACK_BINARY) joins
     and the same job runs on it alone: the CPU's rate.
Pixels/s = width x height / (submission to the submitter's "done" line). Prints one line per figure,
the ratio browser / CPU, the load average, and one JSON line. Needs chromium and tests/browser/node_modules.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
from pool_bench import Bench  # noqa: E402
from test_browser_worker import PageDriver  # noqa: E402


def submit(b, binary, ready, user, args, tag):
    t0 = time.monotonic()
    if args.workload == "matmul":
        job = ["matmul", "--n", str(args.n), "--block", str(args.block), "--seed", "7",
               "--out", os.path.join(b.tmp, tag + "-matmul")]
    else:
        job = ["render", "--scene", args.scene, "--width", str(args.width), "--height", str(args.height), "--spp",
               str(args.spp), "--tile", str(args.tile), "--overlap", str(args.overlap),
               "--out", os.path.join(b.tmp, tag + ".png")]
    cp = subprocess.run([binary, "pool", "submit", ready["submit"], *job, "--budget", "100000", "--wait", "--json"],
                        env=b.env(user), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=1800)
    seconds = time.monotonic() - t0
    done = json.loads(cp.stdout.strip().splitlines()[-1])
    if done.get("state") != "done":
        raise RuntimeError("%s did not finish: %s %s" % (tag, done, cp.stderr))
    return seconds, done


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--worker-binary")
    ap.add_argument("--scene", default=os.path.join(REPO, "examples", "scenes", "spheres.json"))
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--height", type=int, default=192)
    ap.add_argument("--spp", type=int, default=8)
    ap.add_argument("--tile", type=int, default=64)
    ap.add_argument("--overlap", type=int, default=8)
    ap.add_argument("--kind", choices=("webgpu", "wasm"), default="webgpu")
    ap.add_argument("--workload", choices=("render", "matmul"), default="render")
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--block", type=int, default=64)
    args = ap.parse_args()
    binary = os.path.abspath(args.binary)
    worker_binary = os.path.abspath(args.worker_binary or args.binary)
    tmp = tempfile.mkdtemp(prefix="runsnack-browserbench-")
    b = Bench(binary, tmp)
    page = None
    try:
        _, chome = b.start("coord", "pool", "serve", "--json", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0")
        ready = b.wait_line("coord", lambda e: e.get("event") == "ready")
        user = os.path.join(tmp, "user")
        b.grant(chome, user, 10000000)
        load = os.getloadavg()[0]
        # The unit of work: pixels of a render, tiles of a matmul.
        units = args.width * args.height if args.workload == "render" else (args.n // args.block) ** 2
        unit = "pixels" if args.workload == "render" else "tiles"

        # 1. Cold: the job waits for the page; the page opens and takes it.
        cold = {}
        th = threading.Thread(target=lambda: cold.update(zip(("seconds", "done"), submit(b, binary, ready, user, args,
                                                                                          "cold"))))
        th.start()
        time.sleep(1)  # the job is in before the page opens
        page = PageDriver(ready["browser_join"], args.kind, "--honest")
        reg = page.wait_stage(("registered", "failed"), 120)
        if not reg or reg["stage"] != "registered":
            raise RuntimeError("the page did not register: %s" % reg)
        th.join()
        first_task_s = page.command("status")["first_task_ms"] / 1000

        # 2. Warm: the same job on the tab alone.
        warm_s, warm = submit(b, binary, ready, user, args, "warm")
        # 3. The tab paused, a native CPU worker alone.
        if page.command("pause")["state"] != "paused":
            raise RuntimeError("the page did not pause")
        home = os.path.join(tmp, "cpu")
        os.makedirs(home, exist_ok=True)
        log = open(os.path.join(tmp, "cpu.log"), "w")
        b.procs.append(subprocess.Popen([worker_binary, "pool", "join", ready["join"], "--cpu"], env=b.env(home),
                                        stdout=log, stderr=subprocess.STDOUT))
        b.wait_line("coord", lambda e: e.get("event") == "device_registered" and args.kind not in json.dumps(e), 120)
        cpu_s, cpu = submit(b, binary, ready, user, args, "cpu")

        for tag, d, want in (("cold", cold["done"], args.kind), ("warm", warm, args.kind), ("cpu", cpu, "cpu")):
            # A matmul's done line has no per-device count; by construction only one device was on.
            if "tiles_by_device" in d and set(d["tiles_by_device"]) != {want}:
                raise RuntimeError("%s ran on %s, not %s alone" % (tag, d.get("tiles_by_device"), want))
        rows = {"kind": args.kind, "workload": args.workload, "tiles": cpu.get("tasks"),
                "page_open_to_first_task_s": round(first_task_s, 2), "browser_cold_s": round(cold["seconds"], 2),
                "browser_s": round(warm_s, 2), "cpu_s": round(cpu_s, 2),
                "browser_%s_per_s" % unit: round(units / warm_s, 2), "cpu_%s_per_s" % unit: round(units / cpu_s, 2),
                "ratio_browser_to_cpu": round(cpu_s / warm_s, 3), "load_before": round(load, 2),
                "cores": os.cpu_count()}
        if args.workload == "render":
            rows.update(scene=os.path.basename(args.scene), width=args.width, height=args.height, spp=args.spp,
                        tile=args.tile, overlap=args.overlap)
            what = "render %dx%d, %s, %d spp, tiles %d + overlap %d" % (
                args.width, args.height, rows["scene"], args.spp, args.tile, args.overlap)
        else:
            rows.update(n=args.n, block=args.block)
            what = "matmul n %d, block %d" % (args.n, args.block)
        print("%s (%s tiles), browser %s, %d cores, load %.2f before" % (what, rows["tiles"], args.kind, rows["cores"], load))
        print("  page open to first task:            %8.2f s" % first_task_s)
        print("  browser, first job (cold):          %8.2f s" % cold["seconds"])
        print("  browser, warm:                      %8.2f s  %10.2f %s/s" % (warm_s, units / warm_s, unit))
        print("  native CPU worker:                  %8.2f s  %10.2f %s/s" % (cpu_s, units / cpu_s, unit))
        print("  ratio browser / CPU:                %8.3f" % (cpu_s / warm_s))
        print(json.dumps({"browser_render": rows}))
    finally:
        if page:
            page.finish()
        b.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
