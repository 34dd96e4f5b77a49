#!/usr/bin/env bash
# bench/wan_bench.sh [BUILD_DIR] [PRESET...]: runsnack on emulated internet paths (the WAN lab,
# tests/netlab: consumer and provider namespaces joined by wanbridge), each figure next to the
# same-path peer measured in the same run (docs/PERFORMANCE.md, "WAN paths"). Per preset
# (default: lan city continent bad-wifi; then outage):
#   - `runsnack run LINK --no-sync -- true` vs `ssh HOST true` (median of N), the same with the
#     provider's kernel serving TCP Fast Open (net.ipv4.tcp_fastopen=3 in its namespace; Linux's
#     default 1 otherwise), and the same run with a link that also names a rendezvous
#   - first sync of a TREE_MB tree (half the bytes in 4 files, the rest 1-64 KiB files, half
#     compressible) vs `rsync -a -e ssh`, then the no-change re-sync (median of 3)
#   - `runsnack forward` vs `ssh -L` vs direct: download throughput (rate-sized body: about 8 s
#     at the rate; the forward on a new session, then after 6 s idle the median of 3 of each,
#     alternating) and time to the
#     first byte of a streamed HTTP response (median of 5, each a new connection)
#   - `runsnack info` setup time (session setup_ms, and the whole command's wall time)
#   - remote CUDA on the provider's host test double (RUNSNACK_CUDA_BACKEND=host): wall time and
#     synchronous round trips (RUNSNACK_CUDA_STATS=1) of tests/netlab/cuda_loop 1000 (1000 rounds
#     of copy in, kernel launch, copy back; the double runs cuda_loop's kernel on the host)
#   - `info --probe-bytes` throughput direct vs relayed through the rendezvous (a second provider,
#     registered there; for the relayed run the router drops consumer <-> provider traffic, so
#     only the relay is left). The rendezvous runs with --max-relay-mbps $RELAY_MBPS (default
#     1000: what an operator sets to relay at the path's rate; its own default, 100, caps a pair)
# outage: tests/netlab/outage_test.py's forward, run and cuda cases (10 s blackhole): how long
# after the blackhole's end each carried on; and bench/wan_tcp_resume.py: plain TCP with the
# kernel's retransmission backoff vs capped at 1 s (what runsnack's sessions set).
# Each preset's line carries the load average (`uptime`) at its start and end: the machine may
# be shared. Needs root, openssh-server, rsync, curl, iperf3; BUILD_DIR built with runsnack,
# wanbridge and (for the CUDA rows) the shim and cuda_loop: `make release`.
set -uo pipefail

BUILD=$(readlink -f "${1:-build/release}"); shift || true
PRESETS=("$@"); [[ ${#PRESETS[@]} -gt 0 ]] || PRESETS=(lan city continent bad-wifi outage)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$BUILD/src/cli/runsnack
BRIDGE=$BUILD/tests/netlab/wanbridge
CUDA_LOOP=$BUILD/tests/netlab/cuda_loop
SHIM=$BUILD/cuda-shim
TREE_MB=${TREE_MB:-200}
N=${N:-5}
NETLAB="python3 $ROOT/tests/netlab/netlab.py"
[[ -x $BIN && -x $BRIDGE ]] || { echo "wan_bench.sh: build $BIN and $BRIDGE first (make release)" >&2; exit 1; }
[[ $(id -u) == 0 ]] || { echo "wan_bench.sh: needs root (network namespaces)" >&2; exit 1; }
for t in sshd rsync curl; do command -v $t >/dev/null || [[ -x /usr/sbin/$t ]] ||
  { echo "wan_bench.sh: $t missing (scripts/install-deps)" >&2; exit 1; }; done

source "$(dirname "$0")/lib.sh"
bench_scratch wanbench
export WANBRIDGE=$BRIDGE
RESULTS=$TMP/results; : >"$RESULTS"
now() { date +%s.%N; }
load() { cut -d' ' -f1 /proc/loadavg; }
result() { echo "RESULT $PRESET $1 $2" | tee -a "$RESULTS" >&2; }  # result NAME VALUE
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ms_since() { python3 -c "import sys; print(f'{(float(sys.argv[2])-float(sys.argv[1]))*1000:.1f}')" "$1" "$(now)"; }

# --- the lab (one for all presets; the path changes under it) ----------------------------------
$NETLAB up none >"$TMP/lab.json" 2>"$TMP/lab.err" & LAB_PID=$!; PIDS+=($LAB_PID)
for _ in $(seq 1 300); do [[ -s $TMP/lab.json ]] && break; sleep 0.1; done
[[ -s $TMP/lab.json ]] || { echo "wan_bench.sh: the lab did not start: $(cat "$TMP/lab.err")" >&2; exit 1; }
labval() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, d))" "$TMP/lab.json" "$1"; }
NS_C=$(labval 'namespaces["consumer"]'); NS_P=$(labval 'namespaces["provider"]'); NS_R=$(labval 'namespaces["router"]')
CTL=$(labval control); P_ADDR=$(labval 'addresses["provider"]'); R_ADDR=$(labval 'addresses["router"]')
# nsenter, not `ip netns exec`: that one also mounts a fresh /sys, with no cgroups under it, so the
# provider's commands would run without them (nor their cost). Background processes are started with
# nsenter itself, which execs in place: $! is theirs.
inC() { nsenter --net="/run/netns/$NS_C" "$@"; }
inP() { nsenter --net="/run/netns/$NS_P" "$@"; }
inR() { nsenter --net="/run/netns/$NS_R" "$@"; }

# Provider side: an HTTP server (a body of any size; a streamed response), sshd, the rendezvous
# (in the router), the provider.
cat >"$TMP/web_server.py" <<'PY'
import http.server, socketserver, sys
CHUNK = bytes(range(256)) * 4096  # 1 MiB
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path.startswith("/bytes/"):
            n = int(self.path.split("/")[2])
            self.send_response(200); self.send_header("Content-Length", str(n)); self.end_headers()
            while n > 0:
                k = min(n, len(CHUNK)); self.wfile.write(CHUNK[:k]); n -= k
        else:  # a streamed response: its first bytes at once, more later
            self.send_response(200); self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked"); self.end_headers()
            self.wfile.write(b"6\r\nfirst\n\r\n"); self.wfile.flush()
            self.wfile.write(b"5\r\nlast\n\r\n0\r\n\r\n")
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True; allow_reuse_address = True
S(("0.0.0.0", 8080), H).serve_forever()
PY
nsenter --net="/run/netns/$NS_P" python3 "$TMP/web_server.py" & PIDS+=($!)
mkdir -p /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$TMP/host_key"; ssh-keygen -q -t ed25519 -N '' -f "$TMP/user_key"
cp "$TMP/user_key.pub" "$TMP/authorized_keys"
printf '%s\n' "Port 22" "ListenAddress 0.0.0.0" "HostKey $TMP/host_key" "AuthorizedKeysFile $TMP/authorized_keys" \
  "PidFile $TMP/sshd.pid" "StrictModes no" "UsePAM no" "PermitRootLogin prohibit-password" \
  "PasswordAuthentication no" "AllowTcpForwarding yes" "LogLevel ERROR" "UseDNS no" >"$TMP/sshd_config"
nsenter --net="/run/netns/$NS_P" /usr/sbin/sshd -D -e -f "$TMP/sshd_config" 2>"$TMP/sshd.log" & PIDS+=($!)
SSH=(ssh -q -c aes128-gcm@openssh.com -i "$TMP/user_key" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
     -o BatchMode=yes)
nsenter --net="/run/netns/$NS_R" "$BIN" rendezvous --listen 0.0.0.0:7443 --max-relay-mbps "${RELAY_MBPS:-1000}" --json >"$TMP/rdv.out" 2>"$TMP/rdv.err" & PIDS+=($!)
# Two providers: one whose link names only its address (most figures), one registered with the
# rendezvous (direct vs relayed, and what a rendezvous in the link costs a short command).
start_provider() {  # start_provider NAME PORT [share options]: sets LINK_OUT
  local name=$1 port=$2; shift 2
  mkdir -p "$TMP/$name"
  nsenter --net="/run/netns/$NS_P" env RUNSNACK_HOME="$TMP/$name" RUNSNACK_CUDA_BACKEND=host "$BIN" share --json --no-qr \
    --no-port-mapping --listen "0.0.0.0:$port" --allow run,cp,cuda --expose web=8080 "$@" \
    >"$TMP/$name.out" 2>"$TMP/$name.err" & PIDS+=($!)
  for _ in $(seq 1 300); do grep -q '"ready"' "$TMP/$name.out" 2>/dev/null && break; sleep 0.1; done
  LINK_OUT=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["link"])' "$TMP/$name.out") ||
    { echo "wan_bench.sh: the provider did not start: $(cat "$TMP/$name.err")" >&2; exit 1; }
}
start_provider p 7443; LINK=$LINK_OUT
start_provider prdv 7444 --rendezvous "$R_ADDR:7443"; RDV_LINK=$LINK_OUT
for _ in $(seq 1 100); do inC bash -c "exec 3<>/dev/tcp/$P_ADDR/22" 2>/dev/null && break; sleep 0.1; done

# The tree to sync.
python3 - "$TMP/tree" "$TREE_MB" <<'PY'
import os, random, sys
root, mb = sys.argv[1], int(sys.argv[2])
random.seed(1)
total = mb << 20
os.makedirs(root)
for i in range(4):
    with open(f"{root}/big{i}.bin", "wb") as f: f.write(os.urandom(total // 8))
left, n = total // 2, 0
while left > 0:
    d = f"{root}/d{n // 200}"; os.makedirs(d, exist_ok=True)
    size = min(left, random.randint(1, 64) << 10)
    with open(f"{d}/f{n}.dat", "wb") as f: f.write(os.urandom(size // 2) + b"x" * (size - size // 2))
    left -= size; n += 1
print(f"tree: {mb} MiB, {n + 4} files", file=sys.stderr)
PY

rate_of() { python3 -c "import sys; sys.path.insert(0, '$ROOT/tests/netlab'); import netlab; print(netlab.PRESETS[sys.argv[1]].get('$2', 0))" "$1"; }

bench_path() {
  local rate rtt body home run_t ssh_t
  rate=$(rate_of "$PRESET" rate_mbit); rtt=$(rate_of "$PRESET" rtt_ms)
  $NETLAB set "$CTL" "$PRESET" >/dev/null
  home=$TMP/c-$PRESET; mkdir -p "$home"
  rs() { inC env RUNSNACK_HOME="$home" "$BIN" "$@"; }
  result load_start "$(load)"

  echo "== $PRESET: run -- true vs ssh true" >&2
  mkdir -p "$TMP/empty"; rs run "$LINK" --sync "$TMP/empty" -- true  # warm up: identity, workspace
  run_t=(); ssh_t=()
  for _ in $(seq "$N"); do
    t=$(now); rs run "$LINK" --no-sync -- true; run_t+=("$(ms_since "$t")")
    t=$(now); inC "${SSH[@]}" "root@$P_ADDR" true; ssh_t+=("$(ms_since "$t")")
  done
  result run_true_ms "$(median "${run_t[@]}")"; result ssh_true_ms "$(median "${ssh_t[@]}")"
  nsenter --net="/run/netns/$NS_P" sysctl -qw net.ipv4.tcp_fastopen=3
  rs run "$LINK" --no-sync -- true  # fetches the Fast Open cookie
  run_t=(); for _ in $(seq "$N"); do t=$(now); rs run "$LINK" --no-sync -- true; run_t+=("$(ms_since "$t")"); done
  result run_true_fast_open_ms "$(median "${run_t[@]}")"
  nsenter --net="/run/netns/$NS_P" sysctl -qw net.ipv4.tcp_fastopen=1
  rs run "$RDV_LINK" --sync "$TMP/empty" -- true
  run_t=(); for _ in $(seq "$N"); do t=$(now); rs run "$RDV_LINK" --no-sync -- true; run_t+=("$(ms_since "$t")"); done
  result run_true_rdv_link_ms "$(median "${run_t[@]}")"

  echo "== $PRESET: first sync of $TREE_MB MiB vs rsync -a -e ssh" >&2
  sync; t=$(now); rs run "$LINK" --sync "$TMP/tree" -- true 2>/dev/null; result sync_first_ms "$(ms_since "$t")"
  sync; t=$(now); inC rsync -a -e "${SSH[*]}" "$TMP/tree/" "root@$P_ADDR:$TMP/rsync-$PRESET/"
  result rsync_first_ms "$(ms_since "$t")"
  run_t=(); ssh_t=()
  for _ in 1 2 3; do
    t=$(now); rs run "$LINK" --sync "$TMP/tree" -- true 2>/dev/null; run_t+=("$(ms_since "$t")")
    t=$(now); inC rsync -a -e "${SSH[*]}" "$TMP/tree/" "root@$P_ADDR:$TMP/rsync-$PRESET/"; ssh_t+=("$(ms_since "$t")")
  done
  result resync_ms "$(median "${run_t[@]}")"; result rsync_resync_ms "$(median "${ssh_t[@]}")"

  echo "== $PRESET: forward vs ssh -L vs direct" >&2
  body=$(python3 -c "print(int(min(400, max(20, $rate)) * 2**20))")
  nsenter --net="/run/netns/$NS_C" env RUNSNACK_HOME="$home" "$BIN" forward --json "$LINK" 18080:web >"$TMP/fwd-$PRESET.out" \
    2>"$TMP/fwd-$PRESET.err" & local fwd=$!; PIDS+=($fwd)
  nsenter --net="/run/netns/$NS_C" "${SSH[@]}" -N -L 127.0.0.1:18081:127.0.0.1:8080 "root@$P_ADDR" & local sshl=$!; PIDS+=($sshl)
  for _ in $(seq 1 300); do grep -q '"ready"' "$TMP/fwd-$PRESET.out" && inC bash -c 'exec 3<>/dev/tcp/127.0.0.1/18081' 2>/dev/null && break; sleep 0.1; done
  mbit() { inC curl -s -o /dev/null -w '%{speed_download}' "$1" | awk '{printf "%.1f", $1 * 8 / 1e6}'; }
  result forward_new_session_mbit "$(mbit "http://127.0.0.1:18080/bytes/$body")"
  sleep 6
  # One download of each is one draw of where the path's losses fall: the median of 3, alternating.
  local fwd_t=() sshl_t=() direct_t=()
  for _ in 1 2 3; do
    fwd_t+=("$(mbit "http://127.0.0.1:18080/bytes/$body")")
    sshl_t+=("$(mbit "http://127.0.0.1:18081/bytes/$body")")
    direct_t+=("$(mbit "http://$P_ADDR:8080/bytes/$body")")
  done
  result forward_mbit "$(median "${fwd_t[@]}")"
  result ssh_l_mbit "$(median "${sshl_t[@]}")"
  result direct_mbit "$(median "${direct_t[@]}")"
  ttfb() { local v=(); for _ in $(seq 5); do v+=("$(inC curl -s -o /dev/null -w '%{time_starttransfer}' "$1" | awk '{printf "%.1f", $1 * 1000}')"); done; median "${v[@]}"; }
  result forward_ttfb_ms "$(ttfb http://127.0.0.1:18080/stream)"
  result ssh_l_ttfb_ms "$(ttfb http://127.0.0.1:18081/stream)"
  result direct_ttfb_ms "$(ttfb "http://$P_ADDR:8080/stream")"
  kill "$fwd" "$sshl" 2>/dev/null; wait "$fwd" "$sshl" 2>/dev/null

  echo "== $PRESET: info" >&2
  run_t=(); ssh_t=()
  for _ in 1 2 3; do
    t=$(now); rs info "$LINK" >/dev/null; run_t+=("$(ms_since "$t")")
    ssh_t+=("$(rs info "$LINK" --json --probe-bytes 1 | python3 -c 'import json,sys; print(json.loads(sys.stdin.read().strip().splitlines()[-1])["setup_ms"])')")
  done
  result info_wall_ms "$(median "${run_t[@]}")"; result info_setup_ms "$(median "${ssh_t[@]}")"

  if [[ -x $CUDA_LOOP && -e $SHIM/libcuda.so.1 ]]; then
    echo "== $PRESET: cuda_loop 1000 (host test double)" >&2
    t=$(now)
    inC env RUNSNACK_HOME="$home" RUNSNACK_CUDA_LIBDIR="$SHIM" RUNSNACK_CUDA_STATS=1 "$BIN" cuda "$LINK" -- \
      "$CUDA_LOOP" 1000 >"$TMP/cuda-$PRESET.out" 2>"$TMP/cuda-$PRESET.err"
    result cuda_1000_rounds_wall_ms "$(ms_since "$t")"
    result cuda_sync_round_trips "$(grep -o '[0-9]* synchronous round trips' "$TMP/cuda-$PRESET.err" | cut -d' ' -f1)"
  fi

  echo "== $PRESET: direct vs relayed (info --probe-bytes)" >&2
  probe() { rs info "$RDV_LINK" --json --probe-bytes "$body" --timeout 30 | python3 -c 'import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print(d["path"], round(d["mbps"], 1))'; }
  read -r path v < <(probe); result "probe_${path}_mbit" "$v"
  inR iptables -A FORWARD -s 203.0.113.0/24 -d 198.51.100.0/24 -j DROP
  inR iptables -A FORWARD -s 198.51.100.0/24 -d 203.0.113.0/24 -j DROP
  read -r path v < <(probe); result "probe_${path}_mbit" "$v"
  inR iptables -D FORWARD -s 203.0.113.0/24 -d 198.51.100.0/24 -j DROP
  inR iptables -D FORWARD -s 198.51.100.0/24 -d 203.0.113.0/24 -j DROP
  result load_end "$(load)"
}

for PRESET in "${PRESETS[@]}"; do
  if [[ $PRESET == outage ]]; then
    echo "== outage: tests/netlab/outage_test.py forward run cuda" >&2
    result load_start "$(load)"
    python3 "$ROOT/tests/netlab/outage_test.py" "$BIN" "$BRIDGE" "$CUDA_LOOP" forward run cuda | tee "$TMP/outage.out" >&2
    for c in forward run cuda; do
      v=$(awk -v c="$c:" '$1 == c && /first output/ {print $4}' "$TMP/outage.out"); [[ -n $v ]] && result "${c}_resumed_s" "$v"
    done
    echo "== outage: plain TCP, default backoff vs capped at 1 s (bench/wan_tcp_resume.py)" >&2
    python3 "$ROOT/bench/wan_tcp_resume.py" | tee "$TMP/tcp_resume.out" >&2
    while read -r _ rto _ rtt _ _ _ took _; do result "tcp_rto_max_${rto%,}_rtt_${rtt}_resumed_s" "$took"; done \
      < <(grep '^tcp_rto_max_ms' "$TMP/tcp_resume.out")
    result load_end "$(load)"
    continue
  fi
  bench_path
done

echo
echo "WAN bench $(date -u +%FT%TZ), $BUILD, TREE_MB=$TREE_MB, N=$N"
python3 - "$RESULTS" <<'PY'
import sys, collections
r = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    _, preset, name, value = line.split()[:4]
    r[preset][name] = value
def f(p, k):
    return r[p].get(k, "n/a")
def ratio(p, a, b):
    try: return f"{float(r[p][a]) / float(r[p][b]):.2f}x"
    except (KeyError, ValueError, ZeroDivisionError): return "n/a"
for p, v in r.items():
    print(f"\n{p} (load {f(p, 'load_start')} -> {f(p, 'load_end')})")
    if p == "outage":
        for c in ("forward", "run", "cuda"):
            print(f"  {c}: carried on {f(p, c + '_resumed_s')} s after a 10 s blackhole ended")
        for k in sorted(x for x in v if x.startswith("tcp_rto_max")):
            print(f"  plain TCP, {k}: {v[k]} s")
        continue
    print(f"  run -- true {f(p,'run_true_ms')} ms vs ssh true {f(p,'ssh_true_ms')} ms ({ratio(p,'run_true_ms','ssh_true_ms')}); "
          f"with TCP Fast Open {f(p,'run_true_fast_open_ms')} ms; "
          f"with the rendezvous in the link {f(p,'run_true_rdv_link_ms')} ms")
    print(f"  first sync {f(p,'sync_first_ms')} ms vs rsync {f(p,'rsync_first_ms')} ms (rsync/runsnack "
          f"{ratio(p,'rsync_first_ms','sync_first_ms')}); re-sync {f(p,'resync_ms')} vs {f(p,'rsync_resync_ms')} ms")
    print(f"  forward {f(p,'forward_mbit')} Mbit/s (new session {f(p,'forward_new_session_mbit')}) vs ssh -L "
          f"{f(p,'ssh_l_mbit')} vs direct {f(p,'direct_mbit')} ({ratio(p,'forward_mbit','ssh_l_mbit')} ssh)")
    print(f"  first byte: forward {f(p,'forward_ttfb_ms')} ms, ssh -L {f(p,'ssh_l_ttfb_ms')}, direct {f(p,'direct_ttfb_ms')}")
    print(f"  info {f(p,'info_wall_ms')} ms (session setup {f(p,'info_setup_ms')} ms)")
    print(f"  cuda 1000 rounds {f(p,'cuda_1000_rounds_wall_ms')} ms, {f(p,'cuda_sync_round_trips')} synchronous round trips")
    print(f"  probe direct {f(p,'probe_direct_mbit')} Mbit/s, relayed {f(p,'probe_relayed_mbit')} "
          f"({ratio(p,'probe_relayed_mbit','probe_direct_mbit')})")
PY
