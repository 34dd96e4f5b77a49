#!/usr/bin/env python3
"""NAT lab: real `runsnack` processes in Linux network namespaces behind
iptables NAT routers, on TEST-NET addresses only (docs/ARCHITECTURE.md section 9).

    nl-c2 192.0.2.11 --+                                   +-- nl-c 203.0.113.10
    nl-p  192.0.2.10 --+-- nl-ra --+   bridge in nl-inet   +-- nl-rb
                     LAN A  198.51.100.1   198.51.100.0/24  198.51.100.2   LAN B
                                   +-- nl-rdv 198.51.100.10 (rendezvous)
                                   +-- nl-pp  198.51.100.20 (a public provider)

Cases: same LAN -> direct; public provider -> direct; both behind MASQUERADE
-> punched; provider behind a router running a real miniupnpd (UPnP-IGD and
NAT-PMP, legacy iptables, STUN-discovered external address), consumer behind
--random-fully -> mapped, and the mapping is gone once the provider exits;
a provider whose router answers no mapping request -> its link comes first, the
router's silence after it, and the link works;
both behind MASQUERADE --random-fully -> relayed; rendezvous
restarted during a punched transfer -> the transfer completes. Each moves
>= 50 MB through the session and checks its SHA-256. Asserts path and data,
with generous deadlines, never speed. Needs root; prints why and exits 77
(ctest reports it skipped) otherwise. Namespace names carry the run's pid. Namespaces are removed even on failure.

Usage: natlab.py RUNSNACK_BIN [case ...]
"""
import hashlib, json, os, queue, shutil, subprocess, sys, tempfile, threading, time

from miniupnpd_router import MiniUpnpdRouter, Skip

def ns_name(name):
    """This run's name for a lab namespace: unique per run, so two runs on one machine never share one."""
    return f"{name}-{os.getpid()}"


NS = [ns_name(n) for n in ("nl-inet", "nl-ra", "nl-rb", "nl-p", "nl-c", "nl-c2", "nl-rdv", "nl-pp")]
MB50 = 50 * 1024 * 1024
RDV = "198.51.100.10:7443"


def sh(cmd, check=True):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"{cmd}: {r.stderr.strip()}")
    return r.stdout


def nsx(ns, cmd, check=True):
    return sh(f"ip netns exec {ns} {cmd}", check)


def expected_sha(n):
    block = bytes(((i * 131 + (i >> 8)) & 0xFF) for i in range(65536))
    h = hashlib.sha256()
    full, rest = divmod(n, len(block))
    for _ in range(full):
        h.update(block)
    h.update(block[:rest])
    return h.hexdigest()


def teardown():
    for ns in NS:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def link(a_ns, a_if, a_addr, b_ns, b_if, b_addr=None, bridge=None):
    sh(f"ip link add {a_if} netns {a_ns} type veth peer name {b_if} netns {b_ns}")
    nsx(a_ns, f"ip addr add {a_addr} dev {a_if}")
    nsx(a_ns, f"ip link set {a_if} up")
    if b_addr:
        nsx(b_ns, f"ip addr add {b_addr} dev {b_if}")
    if bridge:
        nsx(b_ns, f"ip link set {b_if} master {bridge}")
    nsx(b_ns, f"ip link set {b_if} up")


def setup():
    teardown()
    for ns in NS:
        sh(f"ip netns add {ns}")
        nsx(ns, "ip link set lo up")
    nsx(ns_name("nl-inet"), "ip link add br0 type bridge")
    nsx(ns_name("nl-inet"), "ip link set br0 up")
    link(ns_name("nl-ra"), "wan", "198.51.100.1/24", ns_name("nl-inet"), "v-ra", bridge="br0")
    link(ns_name("nl-rb"), "wan", "198.51.100.2/24", ns_name("nl-inet"), "v-rb", bridge="br0")
    link(ns_name("nl-rdv"), "eth0", "198.51.100.10/24", ns_name("nl-inet"), "v-rdv", bridge="br0")
    link(ns_name("nl-pp"), "eth0", "198.51.100.20/24", ns_name("nl-inet"), "v-pp", bridge="br0")
    nsx(ns_name("nl-ra"), "ip link add lan type bridge")
    nsx(ns_name("nl-ra"), "ip addr add 192.0.2.1/24 dev lan")
    nsx(ns_name("nl-ra"), "ip link set lan up")
    link(ns_name("nl-p"), "eth0", "192.0.2.10/24", ns_name("nl-ra"), "v-p", bridge="lan")
    link(ns_name("nl-c2"), "eth0", "192.0.2.11/24", ns_name("nl-ra"), "v-c2", bridge="lan")
    link(ns_name("nl-c"), "eth0", "203.0.113.10/24", ns_name("nl-rb"), "lan", b_addr="203.0.113.1/24")
    for ns, gw in ((ns_name("nl-p"), "192.0.2.1"), (ns_name("nl-c2"), "192.0.2.1"), (ns_name("nl-c"), "203.0.113.1")):
        nsx(ns, f"ip route add default via {gw}")
    for r in (ns_name("nl-ra"), ns_name("nl-rb")):
        nsx(r, "sysctl -qw net.ipv4.ip_forward=1")


def nat(random_fully):
    for r in (ns_name("nl-ra"), ns_name("nl-rb")):
        nsx(r, "iptables -t nat -F")
        nsx(r, "iptables -F")
        nsx(r, f"iptables -t nat -A POSTROUTING -o wan -j MASQUERADE {'--random-fully' if random_fully else ''}")
        nsx(r, "iptables -A FORWARD -i wan -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT")
        nsx(r, "iptables -A FORWARD -i wan -j DROP")
        nsx(r, "iptables -A INPUT -i wan -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT")
        nsx(r, "iptables -A INPUT -i wan -j DROP")
        nsx(r, "conntrack -F", check=False)


class Lab:
    def __init__(self, binary):
        self.bin = binary
        self.tmp = tempfile.mkdtemp(prefix="natlab-")
        self.procs = []
        self.rdv = None

    def spawn(self, ns, args, home, log):
        env = dict(os.environ, RUNSNACK_HOME=home, RUNSNACK_LOG=os.environ.get("RUNSNACK_LOG", "info"))
        p = subprocess.Popen(["ip", "netns", "exec", ns, self.bin] + args, env=env, stdout=subprocess.PIPE,
                             stderr=open(os.path.join(self.tmp, log), "ab"), text=True)
        self.procs.append(p)
        return p

    def spawn_raw(self, argv, log):
        """A helper process (router daemon, STUN responder) owned by the lab."""
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=open(os.path.join(self.tmp, log), "ab"), text=True)
        self.procs.append(p)
        return p

    def start_rdv(self, extra=()):
        # Uncapped relay: the lab measures paths (bench/nat_bench.sh compares relay with direct).
        self.rdv = self.spawn(ns_name("nl-rdv"), ["rendezvous", "--listen", "0.0.0.0:7443", "--json", "--max-relay-mbps", "0"] + list(extra),
                              os.path.join(self.tmp, "rdv"), "rdv.log")
        json.loads(self.rdv.stdout.readline())

    def stop(self, p):
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def provider(self, ns, name, port_mapping=False, events=None):
        """Starts a share; returns when it is registered (with port_mapping: registered after the router's
        answer, which comes after the link). `events` collects what it printed until then."""
        home = os.path.join(self.tmp, name)
        os.makedirs(home, exist_ok=True)
        args = ["share", "--json", "--no-qr", "--rendezvous", RDV] + ([] if port_mapping else ["--no-port-mapping"])
        p = self.spawn(ns, args, home, name + ".log")
        lines = queue.Queue()  # read on a thread: a missing event fails at the deadline, not hangs
        threading.Thread(target=lambda: [lines.put(l) for l in p.stdout], daemon=True).start()
        ready = json.loads(lines.get(timeout=60))
        seen = [ready] if events is None else events
        if events is not None:
            events.append(ready)
        # Registered, and with port_mapping also the router's answer: a mapping is followed by a new
        # registration that carries it, no mapping by nothing more.
        answered, registered = not port_mapping, False
        deadline = time.time() + 30
        while not (answered and registered):
            try:
                ev = json.loads(lines.get(timeout=max(0.1, deadline - time.time())))
            except queue.Empty:
                raise AssertionError(f"{name}: no registration{'' if answered else ' nor router answer'} "
                                     f"within 30 s: {seen}")
            seen.append(ev)
            if ev.get("event") == "mapped":
                answered, registered = True, False
            elif ev.get("event") == "port_mapping":
                answered = True
            elif ev.get("event") == "rendezvous" and ev["state"].startswith("registered"):
                registered = True
        assert len(ready["link"]) < 160, ready["link"]
        return p, ready["link"]

    def consume(self, ns, link_text, nbytes=MB50, timeout=120):
        home = os.path.join(self.tmp, "consumer-" + ns)
        os.makedirs(home, exist_ok=True)
        env = dict(os.environ, RUNSNACK_HOME=home, RUNSNACK_LINK=link_text)
        r = subprocess.run(["ip", "netns", "exec", ns, self.bin, "info", "--probe-bytes", str(nbytes), "--timeout", "30"],
                           env=env, capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            raise AssertionError(f"info failed: {r.stderr[-2000:]}")
        return json.loads(r.stdout.strip().splitlines()[-1])

    def close(self):
        for p in self.procs:
            self.stop(p)
        shutil.rmtree(self.tmp, ignore_errors=True)


def check(result, want_path, nbytes=MB50):
    assert result["path"] == want_path, f"path {result['path']}, expected {want_path}: {result}"
    assert result["probe_bytes"] == nbytes, result
    assert result["sha256"] == expected_sha(nbytes), "SHA-256 mismatch"


def run_case(lab, case):
    if case == "same_lan":
        nat(False)
        p, l = lab.provider(ns_name("nl-p"), "prov-a")
        check(res := lab.consume(ns_name("nl-c2"), l), "direct")
    elif case == "public":
        nat(False)
        p, l = lab.provider(ns_name("nl-pp"), "prov-pub")
        check(res := lab.consume(ns_name("nl-c"), l), "direct")
    elif case == "punched":
        nat(False)
        p, l = lab.provider(ns_name("nl-p"), "prov-a")
        check(res := lab.consume(ns_name("nl-c"), l), "punched")
    elif case == "mapped":
        nat(True)  # the consumer's NAT defeats punching, so only the mapping can make it direct
        with MiniUpnpdRouter(ns_name("nl-ra"), "wan", "lan", ns_name("nl-rdv"), "198.51.100.10", lab.tmp, lab.spawn_raw) as router:
            p, l = lab.provider(ns_name("nl-p"), "prov-map", port_mapping=True)
            held = router.mappings()
            assert held, "the provider holds no mapping on the router"
            check(res := lab.consume(ns_name("nl-c"), l), "mapped")
            lab.stop(p)
            left = router.mappings()
            assert not left, f"mapping left on the router after the provider exited (rc {p.returncode}): {left}"
            res["mapping"] = held[0]
        return res
    elif case == "no_router":
        # Router A runs no NAT-PMP or UPnP: the link comes first, the router's silence is told after it.
        nat(False)
        events = []
        p, l = lab.provider(ns_name("nl-p"), "prov-norouter", port_mapping=True, events=events)
        kinds = [e.get("event") for e in events]
        assert kinds[0] == "ready" and "link" in events[0], kinds
        answer = [e for e in events if e.get("event") in ("mapped", "port_mapping")]
        assert answer and answer[0]["event"] == "port_mapping" and answer[0]["mapped"] is False, events
        check(res := lab.consume(ns_name("nl-c2"), l), "direct")
    elif case == "relayed":
        nat(True)
        p, l = lab.provider(ns_name("nl-p"), "prov-a")
        check(res := lab.consume(ns_name("nl-c"), l), "relayed")
    elif case == "rdv_restart":
        nat(False)
        p, l = lab.provider(ns_name("nl-p"), "prov-a")
        n = 2048 * 1024 * 1024  # long enough to still be running at the restart in a release build
        home = os.path.join(lab.tmp, "consumer-restart")
        os.makedirs(home, exist_ok=True)
        env = dict(os.environ, RUNSNACK_HOME=home, RUNSNACK_LINK=l)
        c = subprocess.Popen(["ip", "netns", "exec", ns_name("nl-c"), lab.bin, "info", "--probe-bytes", str(n), "--timeout", "30"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # Connected and transferring: a TCP connection from the consumer to anything but the
        # rendezvous (the ASan build alone takes seconds to start on a loaded machine).
        deadline = time.time() + 120
        while time.time() < deadline and c.poll() is None:
            peers = subprocess.run(["ip", "netns", "exec", ns_name("nl-c"), "ss", "-Htn", "state", "established"],
                                   capture_output=True, text=True).stdout.split()
            if any(":" in w and not w.startswith("198.51.100.10:")
                   for w in peers[3::4]):
                break
            time.sleep(0.2)
        time.sleep(1.0)
        assert c.poll() is None, "transfer ended before the restart; make it larger"
        lab.stop(lab.rdv)
        lab.start_rdv()
        out, err = c.communicate(timeout=300)
        assert c.returncode == 0, err[-2000:]
        res = json.loads(out.strip().splitlines()[-1])
        check(res, "punched", n)
    else:
        raise ValueError(case)
    lab.stop(p)
    return res


SKIPPED = 77  # ctest's SKIP_RETURN_CODE: a lab that cannot run is reported as skipped, never as passed


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    if os.geteuid() != 0:
        print("natlab: SKIPPED: needs root (network namespaces and iptables)")
        return SKIPPED
    for tool in ("ip", "iptables", "unshare"):
        if not shutil.which(tool):
            print(f"natlab: SKIPPED: {tool} is not installed (scripts/install-deps)")
            return SKIPPED
    # Root is not enough in some containers: a namespace of our own, with NAT tables in it, must work.
    probe = subprocess.run(["unshare", "--net", "iptables", "-t", "nat", "-L", "-n"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"natlab: SKIPPED: no network namespace with iptables NAT here ({probe.stderr.strip()[:200]})")
        return SKIPPED
    cases = sys.argv[2:] or ["same_lan", "public", "punched", "mapped", "no_router", "relayed", "rdv_restart"]
    failed = ran = 0
    try:
        setup()
        lab = Lab(os.path.abspath(sys.argv[1]))
        try:
            lab.start_rdv()
            for case in cases:
                t0 = time.time()
                try:
                    try:
                        res = run_case(lab, case)
                    except Skip as why:
                        print(f"natlab {case}: SKIPPED: {why}", flush=True)
                        continue
                    ran += 1
                    print(f"natlab {case}: ok path={res['path']} setup_ms={res['setup_ms']:.1f} "
                          f"first_byte_ms={res['first_byte_ms']:.1f} mbps={res['mbps']:.0f} ({time.time() - t0:.1f} s)"
                          + (f" mapping={res['mapping']}" if "mapping" in res else ""),
                          flush=True)
                except Exception as e:  # report and go on with the next case
                    failed += 1
                    ran += 1
                    print(f"natlab {case}: FAILED: {e}", flush=True)
        finally:
            if failed:
                for f in sorted(os.listdir(lab.tmp)):
                    if f.endswith(".log"):
                        print(f"--- {f}\n" + open(os.path.join(lab.tmp, f), errors="replace").read()[-3000:])
            lab.close()
    finally:
        teardown()
    if failed:
        return 1
    return 0 if ran else SKIPPED  # every case skipped: nothing was shown to work


if __name__ == "__main__":
    sys.exit(main())
