#!/usr/bin/env bash
# bench/forward_cpu.sh BUILD_DIR: CPU seconds per GiB of bulk transfer, summed over the two
# tunnel processes (utime + stime from /proc), for `runsnack forward` + `share` and, when sshd
# can run here, `ssh -L` (aes128-gcm) + its sshd; plus Gbit/s of each run; then CPU us per
# 64-byte round trip (request/response) over 20000 of them. Steadier measures than wall-clock
# figures on a shared machine. BENCH_BYTES per run (default 2 GiB), CPU_RUNS runs per path
# (default 3). Every process started here is killed by PID on exit.
set -uo pipefail

BUILD=${1:-build/release}
BIN=$BUILD/src/cli/runsnack
BENCH=$BUILD/bench/session_bench
[[ -x $BIN && -x $BENCH ]] || { echo "forward_cpu.sh: build runsnack and session_bench in $BUILD" >&2; exit 1; }
BYTES=${BENCH_BYTES:-$((2 << 30))}
RUNS=${CPU_RUNS:-3}

source "$(dirname "$0")/lib.sh"
bench_scratch fwdcpu

descendants() { local p; for p in $(pgrep -P "$1"); do echo "$p"; descendants "$p"; done; }
# CPU ticks (utime + stime) of the given processes and their descendants.
ticks() {
  local total=0 p
  for p in "$@" $(for q in "$@"; do descendants "$q"; done); do
    [[ -r /proc/$p/stat ]] || continue
    total=$((total + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0)))
  done
  echo "$total"
}

"$BENCH" server >"$TMP/server.out" & PIDS+=($!)
for _ in $(seq 1 100); do grep -q '^PORT' "$TMP/server.out" 2>/dev/null && break; sleep 0.05; done
SINK_PORT=$(awk '/^PORT/{print $2}' "$TMP/server.out")

mkdir -p "$TMP/p" "$TMP/c"
RUNSNACK_HOME=$TMP/p "$BIN" share --json --listen 127.0.0.1:0 --expose "sink=$SINK_PORT" >"$TMP/share.out" 2>"$TMP/share.err" &
SHARE_PID=$!; PIDS+=($SHARE_PID)
for _ in $(seq 1 200); do grep -q '"ready"' "$TMP/share.out" && break; sleep 0.05; done
LINK=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["link"])' "$TMP/share.out")
F_SINK=$(free_port)
RUNSNACK_HOME=$TMP/c "$BIN" forward --json "$LINK" "$F_SINK:sink" >"$TMP/fwd.out" 2>"$TMP/fwd.err" &
FWD_PID=$!; PIDS+=($FWD_PID)
for _ in $(seq 1 200); do grep -q '"ready"' "$TMP/fwd.out" && break; sleep 0.05; done
grep -q '"ready"' "$TMP/fwd.out" || { echo "forward_cpu.sh: runsnack forward did not start: $(cat "$TMP/fwd.err")" >&2; exit 1; }

SSH_SINK=""; SSH_PID=""; SSHD_PID=""
if start_sshd; then
  SSH_SINK=$(free_port)
  ssh -c aes128-gcm@openssh.com -q -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes \
    -o ExitOnForwardFailure=yes -i "$TMP/user_key" -p "$SSH_PORT" -N -L "127.0.0.1:$SSH_SINK:127.0.0.1:$SINK_PORT" \
    root@127.0.0.1 & SSH_PID=$!; PIDS+=($SSH_PID)
  wait_port "$SSH_SINK" || SSH_SINK=""
fi

HZ=$(getconf CLK_TCK)
measure() {  # measure LABEL PORT PID...
  local label=$1 port=$2; shift 2
  local i before after gbps
  for i in $(seq 1 "$RUNS"); do
    before=$(ticks "$@")
    gbps=$(BENCH_BYTES=$BYTES BENCH_RUNS=1 BENCH_PINGS=1 "$BENCH" tcp "$port" "$label" | awk '/throughput_gbps/{print $4}')
    after=$(ticks "$@")
    awk -v l="$label" -v t=$((after - before)) -v hz="$HZ" -v b="$BYTES" -v g="$gbps" \
      'BEGIN { printf "RESULT %s cpu_s_per_gib %.2f gbps %s\n", l, t / hz / (b / 2^30), g }'
  done
}
PINGS=20000
measure_rtt() {  # measure_rtt LABEL PORT PID...
  local label=$1 port=$2; shift 2
  local before after
  before=$(ticks "$@")
  BENCH_BYTES=1 BENCH_RUNS=1 BENCH_PINGS=$PINGS "$BENCH" tcp "$port" "$label" >/dev/null
  after=$(ticks "$@")
  awk -v l="$label" -v t=$((after - before)) -v hz="$HZ" -v n=$PINGS \
    'BEGIN { printf "RESULT %s cpu_us_per_round_trip %.1f\n", l, t / hz / n * 1e6 }'
}
echo "load: $(uptime)"
measure runsnack-forward "$F_SINK" "$SHARE_PID" "$FWD_PID"
[[ -n $SSH_SINK ]] && measure ssh-aes128gcm "$SSH_SINK" "$SSH_PID" "$SSHD_PID"
measure_rtt runsnack-forward "$F_SINK" "$SHARE_PID" "$FWD_PID"
[[ -n $SSH_SINK ]] && measure_rtt ssh-aes128gcm "$SSH_SINK" "$SSH_PID" "$SSHD_PID"
echo "load: $(uptime)"
