#!/usr/bin/env python3
"""`runsnack run` across an outage at each side's keepalive edge, in the WAN lab (netlab.py: 40 ms
RTT, 200 Mbit/s). Whichever side gives the session up first, the run re-attaches to its command and
loses nothing (issue 39, item 7). Real processes: a provider in the provider namespace, `run` in
the consumer namespace.

Each case: `runsnack run` of a command printing a number a second for 26 s; 3 s in, the path is cut
both ways, then one side is kept from hearing the other until its keepalive gives the session up
(its log says so), then the path comes back:
  provider  10 s both ways; then the consumer's data stays dropped (its pure ACKs pass, so the
            provider's output still arrives and the consumer's keepalive stays content) until the
            provider's keepalive gives up. The provider closes the connection: the consumer reads a
            TCP end without TLS close_notify, which is no goodbye: it reconnects and re-attaches.
  consumer  8 s both ways; then the provider's data stays dropped (the consumer's own ping gets
            through, so the provider keeps its session) until the consumer's keepalive gives up.
            8 s, not 10: the consumer's ping (2.5-3.1 s into its silence; 5-6.25 s in builds
            before issue 39) must reach the provider before a ping the provider sent as the cut
            began times out (12.5 s; 10 s before), or the provider would be first. The provider
            must keep the command although the consumer gave up first, and the consumer comes back.
  both      both ways until both keepalives have given up.
Asserts: `run` exits 0, every number once and in order, and it re-attached.

Needs root; exits 77 (ctest: skipped) when the lab cannot run.
Usage: outage_edges_test.py RUNSNACK_BIN WANBRIDGE [case ...]
"""
import json, os, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netlab  # noqa: E402
from outage_test import Lines, assert_counting, numbers  # noqa: E402

CASES = {"provider": "the provider gives up first", "consumer": "the consumer gives up first",
         "both": "both give up"}
LINES = 26            # the command prints 0..25, one a second
CUT_AT_LINE = "3"     # the cut starts once this line has arrived
GAVE_UP = "keepalive timed out"  # what a side's log says when its keepalive gives the session up
EDGE_WAIT_S = 40      # a keepalive gives up 15-17.5 s into a silence; this is only a bound


class Edges:
    def __init__(self, lab, bin, tmp):
        self.lab, self.bin, self.tmp = lab, bin, tmp

    def path(self, name):
        return os.path.join(self.tmp, name + ".log")

    def env(self, home):
        return dict(os.environ, RUNSNACK_HOME=os.path.join(self.tmp, home),
                    RUNSNACK_LOG=os.environ.get("RUNSNACK_LOG", "info"))

    def start_provider(self):
        p = self.lab.popen("provider", [self.bin, "share", "--json", "--no-qr", "--no-port-mapping", "--listen",
                                        "0.0.0.0:7443", "--allow", "run"],
                           env=self.env("provider"), stdout=subprocess.PIPE,
                           stderr=open(self.path("provider"), "ab"), text=True)
        self.link = json.loads(p.stdout.readline())["link"]

    def log_size(self, name):
        return os.path.getsize(self.path(name)) if os.path.exists(self.path(name)) else 0

    def wait_log(self, name, offset, text, what):
        """Waits until `text` is in log `name` past `offset` (an event: a keepalive gave up)."""
        end = time.monotonic() + EDGE_WAIT_S
        while time.monotonic() < end:
            with open(self.path(name), errors="replace") as f:
                f.seek(offset)
                if text in f.read():
                    return
            time.sleep(0.05)
        raise AssertionError(f"{what}: not within {EDGE_WAIT_S} s")

    def run_across(self, case):
        log = f"run-{case}"
        script = f"i=0; while [ $i -lt {LINES} ]; do echo $i; i=$((i+1)); sleep 1; done"
        run = self.lab.popen("consumer", [self.bin, "run", self.link, "--no-sync", "--", "sh", "-c", script],
                             env=self.env("consumer"), stdout=subprocess.PIPE, stderr=open(self.path(log), "ab"),
                             text=True)
        lines = Lines(run)
        lines.wait_for(lambda l: l == CUT_AT_LINE, 120, "the command's output")
        provider_at, consumer_at = self.log_size("provider"), self.log_size(log)
        t0 = time.monotonic()
        if case == "provider":
            self.lab.outage(10)
            self.lab.drop_data("consumer")
            self.wait_log("provider", provider_at, GAVE_UP, "the provider's keepalive giving up")
            self.lab.drop_data("consumer", False)
        elif case == "consumer":
            self.lab.outage(8)
            self.lab.drop_data("provider")
            self.wait_log(log, consumer_at, GAVE_UP, "the consumer's keepalive giving up")
            self.lab.drop_data("provider", False)
        else:
            self.lab.outage(EDGE_WAIT_S + 20)
            self.wait_log("provider", provider_at, GAVE_UP, "the provider's keepalive giving up")
            self.wait_log(log, consumer_at, GAVE_UP, "the consumer's keepalive giving up")
            self.lab.outage(0)  # the path is back now
        print(f"    the path is back {time.monotonic() - t0:.1f} s after the cut began", flush=True)
        rc = run.wait(timeout=120)
        lines.thread.join(5)
        text = open(self.path(log), errors="replace").read()
        assert rc == 0, f"run exited {rc}: {text[-1500:]}"
        assert "re-attached to the remote command" in text, f"run did not re-attach: {text[-1500:]}"
        nums = numbers(lines.snapshot())
        assert_counting(nums, "run output")
        assert nums[-1] == LINES - 1, f"run output ends at {nums[-1]}"


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    bin, bridge = os.path.abspath(argv[1]), argv[2]
    cases = [a for a in argv[3:] if a in CASES] or list(CASES)
    try:
        lab = netlab.WanLab("outage", bridge=bridge, rtt_ms=40)
    except netlab.Skip as why:
        print(f"netlab outage edges: SKIPPED: {why}")
        return netlab.SKIPPED
    tmp = tempfile.mkdtemp(prefix="netlab-edges-")
    failed = 0
    try:
        with lab:
            edges = Edges(lab, bin, tmp)
            edges.start_provider()
            for case in cases:
                print(f"netlab outage edge, {CASES[case]}:", flush=True)
                t0 = time.monotonic()
                try:
                    edges.run_across(case)
                    print(f"netlab outage edge, {CASES[case]}: ok ({time.monotonic() - t0:.1f} s)", flush=True)
                except Exception as e:  # report and go on with the next case
                    failed += 1
                    print(f"netlab outage edge, {CASES[case]}: FAILED: {e}", flush=True)
                finally:
                    lab.drop_data("consumer", False)
                    lab.drop_data("provider", False)
                    lab.outage(0)
    finally:
        if failed:
            netlab.print_logs(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
