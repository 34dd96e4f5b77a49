#!/usr/bin/env python3
"""A new session on a real path moves bulk data near the link rate (issue 23), in the WAN lab
(netlab.py): 40 ms RTT, 50 Mbit/s, no loss; provider and consumer in their own namespaces.

Cases, each against a peer measured on the same path in the same run:
  forward  a 24 MiB HTTP download through `runsnack forward` on a NEW session (the first
           download of a forward started just before) reaches >= 0.8x the direct download
  sync     the first sync of a 500-file tree (~12 MiB: four 1.5 MiB files, the rest 1-32 KiB,
           half of each compressible) by `runsnack run LINK --sync TREE -- true` is no slower
           than `rsync -a -e ssh` of the same tree to a fresh folder (the faster of two runs each,
           so a single scheduling hiccup on a loaded machine does not decide it)

A sanitizer build (the suite's, `--sanitized`) runs the forward case only: its sync is CPU-bound
(ASan makes this tree's sync ~20x slower: 12 s on loopback where the release build takes 0.6 s),
so it would measure the sanitizer, not the path. `bench/wan_bench.sh` and this script given
build/release's binary run both.

Before the first-RTT ping (main at cc629d3) the forward reached 0.56x and the sync took 1.7x
rsync's time on this path (issue 23). Data is checked too: the download's length, the synced
tree's files byte for byte. Needs root, sshd and rsync; exits 77 (ctest: skipped) when the lab or
a tool is missing. Usage: throughput_test.py RUNSNACK_BIN WANBRIDGE [--sanitized] [--rtt-ms=N]
(--rtt-ms=N: another path for the figures, e.g. 100; the goals stay the same)
"""
import filecmp, json, os, random, shutil, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netlab  # noqa: E402

RTT_MS, RATE_MBIT = 40, 50
BODY = 24 << 20
FORWARD_GOAL = 0.8

WEB_SERVER = r'''
import http.server, socketserver, sys
CHUNK = bytes(range(256)) * 4096
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        n = int(self.path.strip("/"))
        self.send_response(200); self.send_header("Content-Length", str(n)); self.end_headers()
        while n > 0:
            k = min(n, len(CHUNK)); self.wfile.write(CHUNK[:k]); n -= k
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True; allow_reuse_address = True
s = S(("0.0.0.0", int(sys.argv[1])), H)
print("ready", flush=True)
s.serve_forever()
'''

# Downloads http://ADDR:PORT/N; prints bytes received and seconds.
DOWNLOAD = r'''
import socket, sys, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = time.monotonic()
s = socket.create_connection((host, port))
s.sendall(b"GET /%d HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n" % n)
got, head = 0, b""
while b"\r\n\r\n" not in head:
    head += s.recv(65536)
got = len(head.split(b"\r\n\r\n", 1)[1])
while True:
    b = s.recv(1 << 20)
    if not b: break
    got += len(b)
print(got, time.monotonic() - t, flush=True)
'''


def make_tree(root):
    random.seed(23)
    os.makedirs(root)
    for i in range(4):
        with open(f"{root}/big{i}.bin", "wb") as f:
            f.write(os.urandom(768 << 10) + b"z" * (768 << 10))
    for n in range(496):
        d = f"{root}/d{n // 100}"
        os.makedirs(d, exist_ok=True)
        size = random.randint(1, 32) << 10
        with open(f"{d}/f{n}.dat", "wb") as f:
            f.write(os.urandom(size // 2) + b"x" * (size - size // 2))


def same_tree(a, b):
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    return not mismatch and not errors and all(same_tree(os.path.join(a, d), os.path.join(b, d))
                                               for d in cmp.common_dirs)


class Lab:
    def __init__(self, lab, bin, tmp):
        self.lab, self.bin, self.tmp = lab, bin, tmp

    def env(self, home):
        return dict(os.environ, RUNSNACK_HOME=os.path.join(self.tmp, home))

    def log(self, name):
        return open(os.path.join(self.tmp, name + ".log"), "ab")

    def start(self):
        web = self.lab.popen("provider", [sys.executable, "-c", WEB_SERVER, "8080"], stdout=subprocess.PIPE, text=True)
        assert web.stdout.readline().strip() == "ready"
        p = self.lab.popen("provider", [self.bin, "share", "--json", "--no-qr", "--no-port-mapping", "--listen",
                                        "0.0.0.0:7443", "--allow", "run", "--expose", "web=8080"],
                           env=self.env("provider"), stdout=subprocess.PIPE, stderr=self.log("provider"), text=True)
        self.link = json.loads(p.stdout.readline())["link"]
        self.provider_home = os.path.join(self.tmp, "provider")
        # sshd in the provider's namespace, for rsync
        os.makedirs("/run/sshd", exist_ok=True)
        for k in ("host_key", "user_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(self.tmp, k)], check=True)
        shutil.copy(os.path.join(self.tmp, "user_key.pub"), os.path.join(self.tmp, "authorized_keys"))
        with open(os.path.join(self.tmp, "sshd_config"), "w") as f:
            f.write("\n".join(["Port 22", "ListenAddress 0.0.0.0", f"HostKey {self.tmp}/host_key",
                               f"AuthorizedKeysFile {self.tmp}/authorized_keys", f"PidFile {self.tmp}/sshd.pid",
                               "StrictModes no", "UsePAM no", "PermitRootLogin prohibit-password",
                               "PasswordAuthentication no", "LogLevel ERROR", "UseDNS no"]) + "\n")
        self.lab.popen("provider", ["/usr/sbin/sshd", "-D", "-e", "-f", os.path.join(self.tmp, "sshd_config")],
                       stderr=self.log("sshd"))
        self.ssh = ["ssh", "-q", "-c", "aes128-gcm@openssh.com", "-i", os.path.join(self.tmp, "user_key"), "-o",
                    "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes"]
        for _ in range(100):
            if self.lab.run("consumer", self.ssh + [f"root@{netlab.PROVIDER_ADDR}", "true"]).returncode == 0:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("sshd in the provider's namespace did not answer")

    def download(self, host, port):
        r = self.lab.run("consumer", [sys.executable, "-c", DOWNLOAD, host, str(port), str(BODY)],
                         capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        got, seconds = r.stdout.split()
        assert int(got) == BODY, f"downloaded {got} bytes of {BODY}"
        return BODY * 8 / float(seconds) / 1e6

    def forward(self):
        direct = self.download(netlab.PROVIDER_ADDR, 8080)
        fwd = self.lab.popen("consumer", [self.bin, "forward", "--json", self.link, "18080:web"],
                             env=self.env("consumer-fwd"), stdout=subprocess.PIPE, stderr=self.log("forward"),
                             text=True)
        for line in fwd.stdout:
            if '"ready"' in line:
                break
        else:
            raise AssertionError("forward ended before it was ready")
        through = self.download("127.0.0.1", 18080)
        netlab.stop(fwd)
        direct2 = self.download(netlab.PROVIDER_ADDR, 8080)
        best_direct = max(direct, direct2)
        print(f"forward on a new session {through:.1f} Mbit/s, direct {direct:.1f} / {direct2:.1f} Mbit/s "
              f"({through / best_direct:.2f}x; goal >= {FORWARD_GOAL}x)", flush=True)
        assert through >= FORWARD_GOAL * best_direct, \
            f"forward on a new session moved {through:.1f} Mbit/s, under {FORWARD_GOAL}x of direct {best_direct:.1f}"

    def sync(self):
        tree = os.path.join(self.tmp, "tree")
        make_tree(tree)
        ours, theirs = [], []
        for i in range(2):
            home = f"consumer-sync{i}"  # a new identity: a new, empty workspace
            t = time.monotonic()
            r = self.lab.run("consumer", [self.bin, "run", self.link, "--sync", tree, "--", "true"],
                             env=self.env(home), capture_output=True, text=True, timeout=300)
            ours.append(time.monotonic() - t)
            assert r.returncode == 0, f"run --sync failed: {r.stderr[-1500:]}"
            dest = os.path.join(self.tmp, f"rsync{i}")
            t = time.monotonic()
            r = self.lab.run("consumer", ["rsync", "-a", "-e", " ".join(self.ssh), tree + "/",
                                          f"root@{netlab.PROVIDER_ADDR}:{dest}/"], capture_output=True, text=True,
                             timeout=300)
            theirs.append(time.monotonic() - t)
            assert r.returncode == 0, f"rsync failed: {r.stderr[-1500:]}"
        # What the provider holds must be the tree (its workspace for the first identity).
        workspaces = [os.path.join(dp, d) for dp, ds, _ in os.walk(self.provider_home) for d in ds
                      if os.path.isdir(os.path.join(dp, d, "d0"))]
        assert workspaces and any(same_tree(tree, w) for w in workspaces), \
            f"no workspace under {self.provider_home} holds the synced tree"
        print(f"first sync of 500 files: runsnack {ours[0]:.2f} / {ours[1]:.2f} s, rsync -a -e ssh "
              f"{theirs[0]:.2f} / {theirs[1]:.2f} s (best {min(ours):.2f} vs {min(theirs):.2f})", flush=True)
        assert min(ours) <= min(theirs), \
            f"the first sync took {min(ours):.2f} s, rsync over ssh {min(theirs):.2f} s on the same path"


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    global RTT_MS
    bin = os.path.abspath(argv[1])
    for a in argv[3:]:
        if a.startswith("--rtt-ms="):
            RTT_MS = float(a.split("=", 1)[1])
    for tool in ("rsync", "ssh", "ssh-keygen"):
        if not shutil.which(tool) or not os.path.exists("/usr/sbin/sshd"):
            print(f"throughput_test: skipped: {tool} or sshd missing (scripts/install-deps)", file=sys.stderr)
            return netlab.SKIPPED
    tmp = tempfile.mkdtemp(prefix="netlab-tput-")
    failed = []
    try:
        with netlab.WanLab("none", bridge=os.path.abspath(argv[2]), rtt_ms=RTT_MS, rate_mbit=RATE_MBIT) as lab:
            case = Lab(lab, bin, tmp)
            case.start()
            cases = ("forward",) if "--sanitized" in argv else ("forward", "sync")
            if "--sanitized" in argv:
                print("   sync: not run: a sanitizer build's sync is CPU-bound (run with build/release)", flush=True)
            for name in cases:
                print(f"== {name} ({RTT_MS} ms RTT, {RATE_MBIT} Mbit/s)", flush=True)
                try:
                    getattr(case, name)()
                    print(f"   {name}: ok", flush=True)
                except AssertionError as e:
                    failed.append(name)
                    print(f"   {name}: FAILED: {e}", flush=True)
    except netlab.Skip as e:
        print(f"throughput_test: skipped: {e}", file=sys.stderr)
        return netlab.SKIPPED
    finally:
        for name in ("provider", "forward", "sshd"):
            path = os.path.join(tmp, name + ".log")
            if failed and os.path.exists(path):
                print(f"--- {name}.log (tail)\n" + open(path, errors="replace").read()[-2000:], flush=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
