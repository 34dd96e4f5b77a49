#!/usr/bin/env python3
"""A 3840x2160 render through the pool on 1, 2 and 4 CPU workers: parallel efficiency.

  bench/render_pool_bench.py RUNSNACK_BINARY [--workers 1 2 4] [--scene FILE] [--spp 16]

For each worker count N: a coordinator and N `runsnack pool join --cpu`
workers on loopback; one `pool submit ... render --width 3840 --height 2160
--tile 128 --overlap 8` job, timed from submission to the stitched PNG.
Worker i is pinned to core i mod (cores) with taskset, so one worker is one
core (the tracer's threads share it) and workers past the core count share
cores. Printed per N: the time until the coordinator accepted the last tile
and the time until the submitter wrote the PNG (it fetches and blends the
tiles itself, a serial part), each with the speed-up over N = 1 and the
parallel efficiency (speed-up / N), plus the load average: the machine is
shared.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pool_bench import Bench  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_one(binary, workers, scene, spp):
    tmp = tempfile.mkdtemp(prefix="runsnack-renderbench-")
    b = Bench(binary, tmp)
    cores = os.cpu_count() or 1
    try:
        _, chome = b.start("coord", "pool", "serve", "--json", "--listen", "127.0.0.1:0")
        ready = b.wait_line("coord", lambda e: e.get("event") == "ready")
        for i in range(workers):
            home = os.path.join(tmp, "w%d" % i)
            os.makedirs(home, exist_ok=True)
            log = open(os.path.join(tmp, "w%d.log" % i), "w")
            b.procs.append(subprocess.Popen(["taskset", "-c", str(i % cores), binary, "pool", "join", ready["join"], "--cpu"],
                                            env=b.env(home), stdout=log, stderr=subprocess.STDOUT))
        deadline = time.time() + 120
        while b.count_lines("coord", lambda e: e.get("event") == "device_registered") < workers:
            if time.time() > deadline:
                raise RuntimeError("workers did not all register")
            time.sleep(0.2)
        user = os.path.join(tmp, "user")
        b.grant(chome, user, 1000000)
        load = os.getloadavg()[0]
        t0 = time.monotonic()
        sub = subprocess.Popen([binary, "pool", "submit", ready["submit"], "render", "--scene", scene, "--width", "3840",
                                "--height", "2160", "--tile", "128", "--overlap", "8", "--spp", str(spp), "--budget",
                                "100000", "--out", os.path.join(tmp, "out"), "--wait", "--json"],
                               env=b.env(user), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # The tiles are rendered when the coordinator has accepted them all; the
        # submitter then fetches and blends them on its own (serial) machine.
        tiles = None
        rendered = None
        while sub.poll() is None:
            if tiles is None:
                ev = [e for e in [b.wait_line("coord", lambda e: e.get("event") == "job_submitted", 60)]]
                tiles = ev[0]["tasks"]
            if rendered is None and b.count_lines("coord", lambda e: e.get("event") == "task_done") >= tiles:
                rendered = time.monotonic() - t0
            time.sleep(0.05)
        out, err = sub.communicate()
        elapsed = time.monotonic() - t0
        done = json.loads(out.strip().splitlines()[-1])
        if done.get("state") != "done":
            raise RuntimeError("render did not finish: %s %s" % (done, err))
        return {"workers": workers, "tiles": done.get("tasks"), "render_seconds": round(rendered or elapsed, 2),
                "seconds": round(elapsed, 2), "load_before": round(load, 2)}
    finally:
        b.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--scene", default=os.path.join(REPO, "examples", "scenes", "spheres.json"))
    ap.add_argument("--spp", type=int, default=16)
    args = ap.parse_args()
    rows = [run_one(args.binary, n, args.scene, args.spp) for n in args.workers]
    base = next((r for r in rows if r["workers"] == 1), None)
    print("render 3840x2160, %s, %d spp, tiles 128 + overlap 8, %d cores:" % (os.path.basename(args.scene), args.spp,
                                                                             os.cpu_count() or 1))
    print("  tiles rendered = submission to the coordinator's last accepted tile; to PNG = the submitter's --wait,")
    print("  which then fetches and blends the tiles (serial)")
    print("%8s %6s %15s %9s %11s %12s %9s %11s %6s" % ("workers", "tiles", "tiles rendered", "speed-up", "efficiency",
                                                        "to PNG", "speed-up", "efficiency", "load"))
    for r in rows:
        s1 = base["render_seconds"] / r["render_seconds"] if base else float("nan")
        s2 = base["seconds"] / r["seconds"] if base else float("nan")
        r["speedup"], r["efficiency"] = round(s1, 3), round(s1 / r["workers"], 3)
        r["speedup_to_png"], r["efficiency_to_png"] = round(s2, 3), round(s2 / r["workers"], 3)
        print("%8d %6d %13.2f s %9.2f %10.0f%% %10.2f s %9.2f %10.0f%% %6.2f" % (
            r["workers"], r["tiles"], r["render_seconds"], s1, 100 * s1 / r["workers"], r["seconds"], s2,
            100 * s2 / r["workers"], r["load_before"]))
    print(json.dumps({"render_pool": rows}))


if __name__ == "__main__":
    main()
