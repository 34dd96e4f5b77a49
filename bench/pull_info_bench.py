#!/usr/bin/env python3
"""bench/pull_info_bench.py [RUNSNACK_BIN] [N]: `info` latency on a provider while another consumer
pulls a 100 GiB sparse file (issue 14), against the same provider idle.

One provider (loopback, --allow run,cp); consumer A runs `run --pull big -- truncate -s 100G big`
in a loop; consumer B runs `runsnack info` N times (default 50) meanwhile; then N times with A
stopped. Prints p50/p99/max of B's wall time for both, and how many pulls A completed and how
long each took. Each `info` is a new process and a new session (TLS handshake included), as a
person would run it. A's folder is checked after each pull: the file must be sparse here too.
"""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

BIN = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/release/src/cli/runsnack")
N = int(sys.argv[2]) if len(sys.argv) > 2 else 50


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def main():
    tmp = tempfile.mkdtemp(prefix="runsnack-pullbench-")
    procs = []
    try:
        env = lambda home: dict(os.environ, RUNSNACK_HOME=os.path.join(tmp, home))
        prov = subprocess.Popen([BIN, "share", "--json", "--no-qr", "--no-port-mapping", "--listen", "127.0.0.1:0",
                                 "--allow", "run,cp"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env("p"))
        procs.append(prov)
        link = json.loads(prov.stdout.readline())["link"]
        dest = os.path.join(tmp, "a-work")
        os.makedirs(dest)
        pulls, stop = [], threading.Event()

        def allocated(path):
            total = 0
            for d, _, files in os.walk(path):
                for f in files:
                    try:
                        total += os.lstat(os.path.join(d, f)).st_blocks * 512
                    except OSError:
                        pass
            return total

        def puller():
            # A pull that writes the holes is stopped before it fills this disk (a provider before issue 14).
            while not stop.is_set():
                t0 = time.monotonic()
                proc = subprocess.Popen([BIN, "run", link, "--pull", "big", "--sync", dest, "--", "truncate", "-s",
                                         "100G", "big"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        env=env("a"))
                while proc.poll() is None:
                    if allocated(dest) > 1 << 30 or time.monotonic() - t0 > 600:
                        proc.kill()
                    time.sleep(0.5)
                big = os.path.join(dest, "big")
                st = os.lstat(big) if os.path.exists(big) else None
                pulls.append((proc.returncode, time.monotonic() - t0, st.st_size if st else 0,
                              st.st_blocks * 512 if st else 0))
                if st:
                    os.remove(big)

        def infos(n):
            out = []
            for _ in range(n):
                t0 = time.monotonic()
                cp = subprocess.run([BIN, "info", "--json", link], capture_output=True, text=True, env=env("b"),
                                    timeout=120)
                out.append((time.monotonic() - t0) * 1000 if cp.returncode == 0 else float("inf"))
            return out

        infos(3)  # warm up: identities
        t = threading.Thread(target=puller)
        t.start()
        time.sleep(1.0)
        during = infos(N)
        stop.set()
        t.join()
        idle = infos(N)
        for name, v in (("idle", idle), ("during 100 GiB sparse pulls", during)):
            print("info %-28s n=%d p50 %.0f ms  p99 %.0f ms  max %.0f ms" % (name, len(v), pct(v, 50), pct(v, 99), max(v)))
        ok = [p for p in pulls if p[0] == 0]
        print("pulls completed: %d of %d, each %.1f s median (apparent %d GiB, %d KiB on disk)" %
              (len(ok), len(pulls), statistics.median([p[1] for p in ok]) if ok else float("nan"),
               (ok[0][2] >> 30) if ok else 0, (ok[0][3] >> 10) if ok else 0))
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
