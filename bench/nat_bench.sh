#!/usr/bin/env bash
# NAT path figures (issue 3), for docs/PERFORMANCE.md:
#  1. per lab path: time from `runsnack info LINK` start to the first byte, and
#     throughput (the NAT lab, tests/natlab/natlab.py: needs root);
#  2. relay throughput as a ratio to the direct path, from the same lab run;
#  3. how many idle relayed sessions one loopback rendezvous holds, and its
#     memory per relayed session (real protocol: register, connect, intro,
#     two relay sides spliced per session).
# Usage: [SKIP_LAB=1] bench/nat_bench.sh RUNSNACK_BIN [SESSIONS (default 1000)]
set -euo pipefail
BIN=$(readlink -f "${1:?usage: nat_bench.sh RUNSNACK_BIN [SESSIONS]}")
SESSIONS=${2:-1000}
HERE=$(cd "$(dirname "$0")" && pwd)

echo "== NAT lab paths ($BIN)"
if [ -n "${SKIP_LAB:-}" ]; then
  echo "skipped: SKIP_LAB is set"
elif [ "$(id -u)" = 0 ]; then
  python3 "$HERE/../tests/natlab/natlab.py" "$BIN" | tee /tmp/nat_bench_lab.$$ | grep '^natlab'
  python3 - /tmp/nat_bench_lab.$$ <<'PY'
import re, sys
rows = {m[0]: dict(re.findall(r"(\w+)=([\d.]+)", m[1])) for m in re.findall(r"^natlab (\w+): ok (.*)$", open(sys.argv[1]).read(), re.M)}
direct = [float(rows[c]["mbps"]) for c in ("same_lan", "public", "punched", "mapped") if c in rows]
if "relayed" in rows and direct:
    d = sum(direct) / len(direct)
    print(f"relay/direct throughput: {float(rows['relayed']['mbps']):.0f} / {d:.0f} Mbit/s = {float(rows['relayed']['mbps']) / d:.2f}x")
PY
  rm -f /tmp/nat_bench_lab.$$
else
  echo "skipped: the NAT lab needs root"
fi

echo "== idle relayed sessions on one loopback rendezvous ($SESSIONS)"
ulimit -n "$(ulimit -Hn)"
python3 - "$BIN" "$SESSIONS" "$(cd "$(dirname "$0")/../tests/natlab" && pwd)" <<'PY'
import json, os, random, socket, struct, subprocess, sys, tempfile, time
binary, n = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, sys.argv[3])
from rdv_wire import Ed25519Key, register, provider_intro  # a provider proves its key (issue 15)
B32 = "abcdefghijklmnopqrstuvwxyz234567"
rid = lambda k: "".join(random.choice(B32) for _ in range(k))
def frame(o):
    b = json.dumps(o).encode(); return struct.pack("!I", len(b)) + b
def read(s):
    def exact(k):
        out = b""
        while len(out) < k:
            c = s.recv(k - len(out))
            if not c: raise ConnectionError("closed")
            out += c
        return out
    return json.loads(exact(struct.unpack("!I", exact(4))[0]))
def rss(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"): return int(line.split()[1]) * 1024
home = tempfile.mkdtemp(prefix="nat-bench-")
rdv = subprocess.Popen([binary, "rendezvous", "--listen", "127.0.0.1:0", "--json", "--max-per-ip", str(4 * n + 64),
                        "--max-relays-per-ip", str(2 * n + 16)],
                       env=dict(os.environ, RUNSNACK_HOME=home, RUNSNACK_LOG="warn"), stdout=subprocess.PIPE, text=True)
try:
    addr = ("127.0.0.1", int(json.loads(rdv.stdout.readline())["listen"].rsplit(":", 1)[1]))
    key, grant = Ed25519Key(), rid(10)
    peer = key.peer
    prov = register(addr, key, [grant])
    time.sleep(0.5)
    base = rss(rdv.pid)
    held, t0 = [], time.time()
    for i in range(n):
        c = socket.create_connection(addr); c.sendall(frame({"t": "connect", "peer": peer, "grant": grant, "candidates": []}))
        while (m := read(c))["t"] == "ping": c.sendall(frame({"t": "pong", "n": m["n"]}))
        c.close()
        token_p = provider_intro(prov)["token"]  # each side has its own token
        a = socket.create_connection(addr); a.sendall(frame({"t": "relay", "token": token_p, "side": "provider"}))
        b = socket.create_connection(addr); b.sendall(frame({"t": "relay", "token": m["token"], "side": "consumer"}))
        assert read(a)["t"] == "relay_ok" and read(b)["t"] == "relay_ok"
        held += [a, b]
    setup = time.time() - t0
    time.sleep(1.0)
    a, b = held[0], held[1]; a.sendall(b"x" * 1000); got = b""
    while len(got) < 1000: got += b.recv(1000)
    total = rss(rdv.pid)
    print(f"{n} idle relayed sessions held ({2 * n} spliced sockets), set up in {setup:.1f} s")
    print(f"rendezvous RSS: {base / 2**20:.1f} MiB before, {total / 2**20:.1f} MiB with {n} sessions; "
          f"{(total - base) / n / 1024:.1f} KiB per relayed session")
finally:
    rdv.terminate(); rdv.wait(10)
    import shutil; shutil.rmtree(home, ignore_errors=True); shutil.rmtree(key.dir, ignore_errors=True)
PY
