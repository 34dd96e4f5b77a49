#!/usr/bin/env python3
"""WAN lab: a consumer and a provider in two Linux network namespaces joined by
an emulated internet path (wanbridge: delay, jitter, loss, reordering, a rate
limit, blackholes), on TEST-NET addresses only (docs/ARCHITECTURE.md section 9).

    consumer ns  203.0.113.2 [wan0 tap] ~~ wanbridge ~~ [wan0 tap] 203.0.113.1  router ns  198.51.100.1 [lan0]
                                                                    (the rendezvous runs here)    |  veth
                                                                                  provider ns  198.51.100.2 [eth0]

Everything between the consumer and the other two crosses the bridge once, so
a relayed session (consumer -> rendezvous -> provider) and a direct one take
the same emulated path; block_direct() makes the router drop consumer <->
provider traffic so that only the relay is left. Namespace names carry the
pid and a random tag: two labs on one machine never collide.

Presets (round-trip time; rate each way; loss each way):
    none       no delay, no limit
    lan        0.5 ms RTT, 1 Gbit/s
    city       20 ms RTT, 200 Mbit/s, 0.1 % loss
    continent  80 ms RTT, 50 Mbit/s, 0.5 % loss
    bad-wifi   40 ms RTT, 20 Mbit/s, 2 % loss in bursts (mean 3 frames), +-10 ms jitter each way
    outage     city's path without loss; outage() blackholes it (10 s by default)

As a library:
    with WanLab("city", bridge=PATH) as lab:
        lab.popen("provider", ["runsnack", "share", ...]); lab.outage(10); lab.stats()
As a command (for bench scripts; needs root):
    netlab.py up PRESET [--rendezvous-port N]   prints one JSON line (namespaces, addresses,
                                                control socket), runs until SIGTERM or SIGINT,
                                                then removes everything
    netlab.py set CONTROL PRESET|KEY=VALUE...   new path parameters on a running lab
    netlab.py outage CONTROL SECONDS            blackhole both directions from now
    netlab.py stats CONTROL                     frames per direction and their fates
WANBRIDGE names the bridge binary (default: build/release, then build/dev); WANBRIDGE_ARGS adds
options to its command line (e.g. "--spin-us 0", for experiments).
Exit status 77 means the lab cannot run here (not root, no TAP support).
"""
import json, os, secrets, shutil, signal, socket, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SKIPPED = 77  # ctest's SKIP_RETURN_CODE: a lab that cannot run is reported as skipped, never as passed

CONSUMER_ADDR, ROUTER_WAN_ADDR = "203.0.113.2", "203.0.113.1"
ROUTER_LAN_ADDR, PROVIDER_ADDR = "198.51.100.1", "198.51.100.2"

PRESETS = {
    "none": dict(rtt_ms=0),
    "lan": dict(rtt_ms=0.5, rate_mbit=1000),
    "city": dict(rtt_ms=20, rate_mbit=200, loss=0.001),
    "continent": dict(rtt_ms=80, rate_mbit=50, loss=0.005),
    "bad-wifi": dict(rtt_ms=40, rate_mbit=20, loss=0.02, loss_burst=3, jitter_ms=10),
    "outage": dict(rtt_ms=20, rate_mbit=200, outage_s=10),
}


class Skip(Exception):
    """The lab cannot run on this machine; the message says why."""


def bridge_params(preset=None, **overrides):
    """The preset (plus overrides) as wanbridge's KEY=VALUE settings, one way."""
    p = dict(PRESETS[preset]) if preset else {}
    p.update(overrides)
    out = {"delay-ms": p.get("rtt_ms", 0) / 2, "jitter-ms": p.get("jitter_ms", 0), "loss": p.get("loss", 0),
           "loss-burst": p.get("loss_burst", 1), "reorder": p.get("reorder", 0), "reorder-ms": p.get("reorder_ms", 0),
           "rate-mbit": p.get("rate_mbit", 0), "queue-ms": p.get("queue_ms", 0)}
    return out


def find_bridge():
    for candidate in (os.environ.get("WANBRIDGE"), f"{ROOT}/build/release/tests/netlab/wanbridge",
                      f"{ROOT}/build/dev/tests/netlab/wanbridge"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise Skip("wanbridge is not built (ninja -C build/release wanbridge, or set WANBRIDGE)")


def sh(argv, check=True):
    r = subprocess.run(argv, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {r.stderr.strip()}")
    return r.stdout


def control(path, line, timeout=5):
    """One command to a running wanbridge; its JSON answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(line.encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    reply = json.loads(data)
    if not reply.get("ok"):
        raise RuntimeError(f"wanbridge refused '{line}': {reply.get('error')}")
    return reply


class WanLab:
    """Namespaces, TAPs, veth, routes and a running wanbridge; close() removes them all."""

    def __init__(self, preset="city", bridge=None, realtime=True, seed=1, **overrides):
        if os.geteuid() != 0:
            raise Skip("needs root (network namespaces, TAP devices)")
        for tool in ("ip", "iptables"):
            if not shutil.which(tool):
                raise Skip(f"{tool} is not installed (scripts/install-deps)")
        if not os.path.exists("/dev/net/tun"):
            raise Skip("/dev/net/tun is missing: no TAP devices here")
        self.preset = preset
        self.bridge_bin = bridge or find_bridge()
        tag = f"{os.getpid()}{secrets.token_hex(2)}"
        self.ns = {"consumer": f"wl{tag}c", "router": f"wl{tag}r", "provider": f"wl{tag}p"}
        self.addr = {"consumer": CONSUMER_ADDR, "router": ROUTER_WAN_ADDR, "provider": PROVIDER_ADDR}
        self.tmp = tempfile.mkdtemp(prefix="netlab-")
        self.control_path = os.path.join(self.tmp, "bridge.sock")
        self.outage_s = PRESETS.get(preset, {}).get("outage_s", 10)
        self.bridge = None
        self.procs = []
        try:
            self._setup()
            self._start_bridge(realtime, seed, bridge_params(preset, **overrides))
        except Exception:
            self.close()
            raise

    # --- set-up -------------------------------------------------------------------------
    def _nsx(self, role, *argv, check=True):
        return sh(["ip", "netns", "exec", self.ns[role], *argv], check)

    def _setup(self):
        for role, ns in self.ns.items():
            sh(["ip", "netns", "add", ns])
            self._nsx(role, "ip", "link", "set", "lo", "up")
            self._nsx(role, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", check=False)
        for role, addr in (("consumer", CONSUMER_ADDR), ("router", ROUTER_WAN_ADDR)):
            r = subprocess.run(["ip", "-n", self.ns[role], "tuntap", "add", "dev", "wan0", "mode", "tap"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                raise Skip(f"cannot make a TAP device: {r.stderr.strip()}")
            self._nsx(role, "ip", "addr", "add", f"{addr}/24", "dev", "wan0")
            self._nsx(role, "ip", "link", "set", "wan0", "up")
        sh(["ip", "link", "add", "lan0", "netns", self.ns["router"], "type", "veth", "peer", "name", "eth0",
            "netns", self.ns["provider"]])
        self._nsx("router", "ip", "addr", "add", f"{ROUTER_LAN_ADDR}/24", "dev", "lan0")
        self._nsx("router", "ip", "link", "set", "lan0", "up")
        self._nsx("provider", "ip", "addr", "add", f"{PROVIDER_ADDR}/24", "dev", "eth0")
        self._nsx("provider", "ip", "link", "set", "eth0", "up")
        self._nsx("consumer", "ip", "route", "add", "default", "via", ROUTER_WAN_ADDR)
        self._nsx("provider", "ip", "route", "add", "default", "via", ROUTER_LAN_ADDR)
        self._nsx("router", "sysctl", "-qw", "net.ipv4.ip_forward=1")

    def _start_bridge(self, realtime, seed, params):
        argv = [self.bridge_bin, "--ns-a", f"/run/netns/{self.ns['consumer']}", "--tap-a", "wan0",
                "--ns-b", f"/run/netns/{self.ns['router']}", "--tap-b", "wan0", "--control", self.control_path,
                "--seed", str(seed)]
        if realtime:
            argv.append("--realtime")
        if os.environ.get("WANBRIDGE_ARGS"):
            argv += os.environ["WANBRIDGE_ARGS"].split()
        for k, v in params.items():
            argv += [f"--{k}", str(v)]
        self.bridge_log = open(os.path.join(self.tmp, "bridge.log"), "w")
        self.bridge = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.bridge_log, text=True)
        line = self.bridge.stdout.readline()
        if '"ready"' not in line:
            self.bridge.wait(5)
            raise RuntimeError(f"wanbridge did not start: {open(self.bridge_log.name).read()[-2000:]}")
        for _ in range(100):  # the control socket comes up right after "ready"
            if os.path.exists(self.control_path):
                break
            time.sleep(0.01)

    # --- use ----------------------------------------------------------------------------
    def argv(self, role, argv):
        """argv run inside the role's network namespace. nsenter, not `ip netns exec`: that one also enters a
        mount namespace with a fresh /sys, where /sys/fs/cgroup is empty, so a provider there would run its
        commands without cgroups (no limits, and none of their cost in the figures)."""
        return ["nsenter", "--net=/run/netns/" + self.ns[role], *argv]

    def popen(self, role, argv, **kwargs):
        """A process in the role's namespace that the lab stops at close()."""
        p = subprocess.Popen(self.argv(role, argv), **kwargs)
        self.procs.append(p)
        return p

    def run(self, role, argv, **kwargs):
        return subprocess.run(self.argv(role, argv), **kwargs)

    def sysctl(self, role, name, value):
        """Sets a per-namespace sysctl in the role's namespace (e.g. net.ipv4.tcp_fastopen)."""
        self._nsx(role, "sysctl", "-qw", f"{name}={value}")

    def set(self, preset=None, **overrides):
        """New path parameters from now on (a preset's, plus overrides)."""
        params = bridge_params(preset, **overrides)
        control(self.control_path, "set " + " ".join(f"{k}={v}" for k, v in params.items()))

    def outage(self, seconds=None):
        """Blackholes both directions for `seconds` (the preset's outage length by default) from now."""
        control(self.control_path, f"outage {1000 * (self.outage_s if seconds is None else seconds):.0f}")

    def stats(self):
        return control(self.control_path, "stats")

    def block_direct(self, blocked=True):
        """The router drops consumer <-> provider traffic (the rendezvous stays reachable): relay only."""
        op = "-A" if blocked else "-D"
        for src, dst in (("203.0.113.0/24", "198.51.100.0/24"), ("198.51.100.0/24", "203.0.113.0/24")):
            self._nsx("router", "iptables", op, "FORWARD", "-s", src, "-d", dst, "-j", "DROP")

    def drop_data(self, sender, dropped=True):
        """The router drops consumer <-> provider TCP segments that carry data from `sender` ("consumer" or
        "provider"), in that direction only; its pure ACKs (and SYNs, FINs) pass. So the other side's data
        still flows and is acknowledged while nothing `sender` says arrives: one side goes silent to the
        other, at its keepalive's edge. A data segment of a session is at least 86 bytes (IP 20 + TCP 32 with
        timestamps + a TLS record of 34 for the smallest yamux frame); a pure ACK at most 80 (40 of options).
        Removing a rule that is not there is not an error."""
        src, dst = (CONSUMER_ADDR, PROVIDER_ADDR) if sender == "consumer" else (PROVIDER_ADDR, CONSUMER_ADDR)
        rule = ["FORWARD", "-p", "tcp", "-s", src, "-d", dst, "-m", "length", "--length", "81:65535", "-j", "DROP"]
        if dropped:
            self._nsx("router", "iptables", "-A", *rule)
        else:
            while subprocess.run(["ip", "netns", "exec", self.ns["router"], "iptables", "-D", *rule],
                                 capture_output=True).returncode == 0:
                pass  # until none is left

    def info(self):
        return {"preset": self.preset, "namespaces": self.ns, "addresses": self.addr,
                "router_lan": ROUTER_LAN_ADDR, "control": self.control_path, "outage_s": self.outage_s,
                "params": bridge_params(self.preset) if self.preset in PRESETS else None}

    def close(self):
        for p in self.procs:
            stop(p)
        if self.bridge:
            stop(self.bridge)
            self.bridge_log.close()
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def print_logs(folder, tail=3000):
    """The end of every *.log in `folder`: what a failed lab run's processes said."""
    for f in sorted(os.listdir(folder)):
        if f.endswith(".log"):
            print(f"--- {f}\n" + open(os.path.join(folder, f), errors="replace").read()[-tail:])


def stop(p, grace=10):
    if p.poll() is None:
        p.terminate()
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    verb = argv[1]
    try:
        if verb == "up":
            preset = argv[2] if len(argv) > 2 else "city"
            if preset not in PRESETS:
                print(f"netlab: unknown preset {preset} (one of {', '.join(PRESETS)})", file=sys.stderr)
                return 2
            with WanLab(preset) as lab:
                print(json.dumps(lab.info()), flush=True)
                done = []
                signal.signal(signal.SIGTERM, lambda *_: done.append(1))
                signal.signal(signal.SIGINT, lambda *_: done.append(1))
                while not done and lab.bridge.poll() is None:
                    time.sleep(0.2)
            return 0
        if verb == "set" and len(argv) >= 4:
            if argv[3] in PRESETS:
                params = bridge_params(argv[3], **{k.replace("-", "_"): float(v) for k, v in
                                                   (kv.split("=", 1) for kv in argv[4:])})
                line = "set " + " ".join(f"{k}={v}" for k, v in params.items())
            else:
                line = "set " + " ".join(argv[3:])
            print(json.dumps(control(argv[2], line)))
            return 0
        if verb == "outage" and len(argv) == 4:
            print(json.dumps(control(argv[2], f"outage {1000 * float(argv[3]):.0f}")))
            return 0
        if verb == "stats" and len(argv) == 3:
            print(json.dumps(control(argv[2], "stats")))
            return 0
    except Skip as why:
        print(f"netlab: SKIPPED: {why}", file=sys.stderr)
        return SKIPPED
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
