#!/usr/bin/env python3
"""bench/round_trips.py BIN [--before OLD_BIN] [RTT_MS ...]: how many round trips `runsnack run LINK
--no-sync -- true` costs, on WAN-lab paths without loss (tests/netlab) of each RTT (default 20 and
100 ms): the median of 5 wall times, and that time in RTTs. What is left over one RTT's multiple is
the fixed cost (the consumer's process start, the sandbox's start on the provider). With --before,
an older build is measured in the same run, alternating. Each build is measured twice: with the
provider's kernel at Linux's default net.ipv4.tcp_fastopen=1 (no TCP Fast Open served), then at 3
(the consumer's warm-up session fetches the cookie, so the measured ones send the ClientHello in the
SYN; docs/INSTALL.md "doctor"). Also prints `runsnack id`'s wall time (the
process start alone). Needs root (network namespaces) and wanbridge (WANBRIDGE, or a build's).
"""
import json, os, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "netlab"))
import netlab  # noqa: E402


def measure(lab, bin_path, rtt_ms, n=5):
    tmp = tempfile.mkdtemp(prefix="rs-rtts-")
    ph, ch = os.path.join(tmp, "p"), os.path.join(tmp, "c")
    os.makedirs(ph), os.makedirs(ch), os.makedirs(os.path.join(tmp, "empty"))
    p = lab.popen("provider", ["env", "RUNSNACK_HOME=" + ph, bin_path, "share", "--json", "--no-qr",
                               "--no-port-mapping", "--listen", "0.0.0.0:7443", "--allow", "run"],
                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        link = json.loads(p.stdout.readline())["link"]
        consumer = ["env", "RUNSNACK_HOME=" + ch, bin_path]
        lab.run("consumer", consumer + ["run", link, "--sync", os.path.join(tmp, "empty"), "--", "true"],
                capture_output=True)  # identity, workspace
        times = []
        for _ in range(n):
            t = time.time()
            cp = lab.run("consumer", consumer + ["run", link, "--no-sync", "--", "true"], capture_output=True)
            times.append((time.time() - t) * 1000)
            if cp.returncode != 0:
                raise SystemExit("run failed: %s" % cp.stderr.decode(errors="replace"))
        starts = []
        for _ in range(n):
            t = time.time()
            lab.run("consumer", consumer + ["id"], capture_output=True)
            starts.append((time.time() - t) * 1000)
        return sorted(times)[n // 2], sorted(starts)[n // 2]
    finally:
        p.terminate()
        p.wait()


def main(argv):
    bins, rtts = [("now", argv[0])], []
    rest = argv[1:]
    while rest:
        if rest[0] == "--before":
            bins.insert(0, ("before", rest[1]))
            rest = rest[2:]
        else:
            rtts.append(float(rest.pop(0)))
    for rtt in rtts or [20.0, 100.0]:
        with netlab.WanLab("none", rtt_ms=rtt) as lab:
            for fast_open in (1, 3):
                lab.sysctl("provider", "net.ipv4.tcp_fastopen", fast_open)
                for name, b in bins:
                    ms, start = measure(lab, b, rtt)
                    print("RTT %5.1f ms  %-6s tcp_fastopen=%d  run --no-sync -- true: %6.1f ms = %.2f RTT; "
                          "process start %.1f ms" % (rtt, name, fast_open, ms, ms / rtt, start), flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 2 or os.geteuid() != 0:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1:])
