#!/usr/bin/env python3
"""TCP Fast Open on a new session (issue 18, net/tcp_tuning.hpp), in the WAN lab's namespaces.

A returning consumer sends its TLS ClientHello in the SYN when the provider's kernel serves TCP
Fast Open (net.ipv4.tcp_fastopen=3), so a new session costs 2 round trips, not 3. The provider
kernel's own counters say whether it happened, so nothing here is timed:
  off        Linux's default (1) on the provider: sessions work, no SYN carried data
             (TcpExtTCPFastOpenPassive stays 0)
  on         at 3: the first session fetches the cookie, the next ones carry their ClientHello in
             the SYN (the counter counts each), and the commands' output is whole
  refused    the provider gone, a consumer holding a cookie (its connect() defers to the first
             write) is told the provider refused the connection, not a TLS error
Needs root; exits 77 (ctest: skipped) when the lab cannot run here.
Usage: fast_open_test.py RUNSNACK_BIN WANBRIDGE
"""
import json, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netlab  # noqa: E402


def tcp_ext(lab, role, name):
    """A TcpExt counter of the role's namespace (/proc/net/netstat is per namespace)."""
    text = lab.run(role, ["cat", "/proc/net/netstat"], capture_output=True, text=True, check=True).stdout
    lines = text.splitlines()
    for head, values in zip(lines[::2], lines[1::2]):
        if head.startswith("TcpExt:"):
            return int(dict(zip(head.split()[1:], values.split()[1:]))[name])
    raise AssertionError("no TcpExt line in /proc/net/netstat")


def check(ok, what):
    print(("ok:     " if ok else "FAILED: ") + what, flush=True)
    if not ok:
        raise SystemExit(1)


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    runsnack, bridge = argv
    try:
        lab = netlab.WanLab("none", bridge=bridge, rtt_ms=2)
    except netlab.Skip as why:
        print(f"netlab fast open: SKIPPED: {why}")
        return netlab.SKIPPED
    with lab:
        tmp = tempfile.mkdtemp(prefix="rs-tfo-")
        ph, ch = os.path.join(tmp, "p"), os.path.join(tmp, "c")
        os.makedirs(ph), os.makedirs(ch)
        consumer = ["env", "RUNSNACK_HOME=" + ch, runsnack]

        def start_provider():
            p = lab.popen("provider", ["env", "RUNSNACK_HOME=" + ph, runsnack, "share", "--json", "--no-qr",
                                       "--no-port-mapping", "--listen", "0.0.0.0:7443", "--allow", "run"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            return p, json.loads(p.stdout.readline())["link"]

        def run_echo(link, word):
            cp = lab.run("consumer", consumer + ["run", link, "--no-sync", "--", "echo", word],
                         capture_output=True, text=True, timeout=60)
            check(cp.returncode == 0 and cp.stdout == word + "\n",
                  f"run -- echo {word}: rc={cp.returncode} out={cp.stdout!r} err={cp.stderr[-500:]!r}")

        provider, link = start_provider()
        lab.sysctl("provider", "net.ipv4.tcp_fastopen", 1)
        for i in range(2):
            run_echo(link, f"off{i}")
        check(tcp_ext(lab, "provider", "TCPFastOpenPassive") == 0,
              "the provider's kernel at tcp_fastopen=1 took no data in a SYN")

        lab.sysctl("provider", "net.ipv4.tcp_fastopen", 3)
        for i in range(4):
            run_echo(link, f"on{i}")
        passive = tcp_ext(lab, "provider", "TCPFastOpenPassive")
        check(passive >= 3, f"at tcp_fastopen=3 the sessions after the cookie's carried data in the SYN ({passive} of 3)")
        check(tcp_ext(lab, "provider", "TCPFastOpenPassiveFail") == 0, "no Fast Open SYN was refused")

        provider.terminate()
        provider.wait(10)
        cp = lab.run("consumer", consumer + ["run", link, "--no-sync", "--", "true"],
                     capture_output=True, text=True, timeout=60)
        check(cp.returncode != 0 and "refused" in cp.stderr.lower() and "TLS:" not in cp.stderr,
              f"provider gone: a clear 'refused' error, not a TLS one: {cp.stderr.strip()[-300:]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
