#!/usr/bin/env bash
# bench/cuda_bench.sh BUILD_DIR: remote CUDA on one GPU machine, provider and
# consumer on 127.0.0.1, all measured in this one run (docs/PERFORMANCE.md):
#   - host-to-device / device-to-host cudaMemcpy throughput (256 MiB, pageable
#     and pinned): native, and through `runsnack cuda` (the real driver behind
#     the provider's cuda-server);
#   - the session stream throughput it is bounded by (`runsnack info
#     --probe-bytes`: 2 GiB through one stream, provider to consumer) and the
#     session RTT;
#   - kernel launch cost (20000 empty launches, issue time and total): native
#     and remote;
#   - synchronous round trips per kernel launch, counted by the shim
#     (RUNSNACK_CUDA_STATS=1 prints them at exit): the difference between a
#     run of 2N launches and one of N, divided by N (goal: 0).
# Round trips per PyTorch training step: tests/cuda/gpu_check.sh (it needs torch).
#
# Needs: a GPU and its driver, nvcc, BUILD_DIR built with the shim
# (ninja -C BUILD runsnack; BUILD/cuda-shim/libcuda.so.1). Run it at normal
# priority inside `flock /work/notes/bench.lock` where benchmarks share a host.
# Every process started here is killed by PID on exit; the temp dir is removed.
set -uo pipefail

BUILD=${1:-build/release}
BIN=$BUILD/src/cli/runsnack
HERE=$(cd "$(dirname "$0")" && pwd)
MIB=${CUDA_BENCH_MIB:-256}
REPEATS=${CUDA_BENCH_REPEATS:-8}
LAUNCHES=${CUDA_BENCH_LAUNCHES:-20000}
[[ -x $BIN ]] || { echo "cuda_bench.sh: $BIN not built (ninja -C $BUILD runsnack)" >&2; exit 1; }
[[ -e $BUILD/cuda-shim/libcuda.so.1 ]] || { echo "cuda_bench.sh: no $BUILD/cuda-shim/libcuda.so.1 (needs cuda.h)" >&2; exit 1; }
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
[[ -x $NVCC ]] || { echo "cuda_bench.sh: nvcc not found" >&2; exit 1; }

source "$(dirname "$0")/lib.sh"
bench_scratch cudabench

echo "== building bench/cuda/copy_bench.cu" >&2
"$NVCC" -O2 -o "$TMP/copy_bench" "$HERE/cuda/copy_bench.cu" || exit 1

RESULTS=$TMP/results
: >"$RESULTS"
record() {  # record SETUP < lines with "RESULT name value unit"
  awk -v setup="$1" '/^RESULT/ { print setup, $2, $3, $4 }' >>"$RESULTS"
}

echo "== native" >&2
"$TMP/copy_bench" copy "$MIB" "$REPEATS" | tee "$TMP/native.out" | record native
"$TMP/copy_bench" launch "$LAUNCHES" | record native

echo "== provider (runsnack share --allow cuda on 127.0.0.1)" >&2
mkdir -p "$TMP/provider" "$TMP/consumer"
RUNSNACK_HOME=$TMP/provider "$BIN" share --json --listen 127.0.0.1:0 --allow cuda >"$TMP/share.out" 2>"$TMP/share.err" &
PIDS+=($!)
for _ in $(seq 1 200); do grep -q '"ready"' "$TMP/share.out" 2>/dev/null && break; sleep 0.05; done
LINK=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    e = json.loads(l)
    if e.get("event") == "ready": print(e["link"])' "$TMP/share.out")
[[ -n $LINK ]] || { echo "cuda_bench.sh: the provider did not start: $(cat "$TMP/share.err")" >&2; exit 1; }
consumer() { RUNSNACK_HOME=$TMP/consumer "$BIN" "$@"; }

echo "== session stream and RTT" >&2
consumer info --json "$LINK" >"$TMP/info.json" || exit 1
python3 -c 'import json,sys; i=json.load(open(sys.argv[1])); print("RESULT rtt %.3f ms" % i["rtt_ms"]); c=i.get("cuda",{}); print("provider cuda:", c, file=sys.stderr)' \
  "$TMP/info.json" | record session
consumer info --json --probe-bytes $((2 << 30)) "$LINK" >"$TMP/probe.json" || exit 1
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); print("RESULT stream %.3f GB/s" % (p["mbps"] / 8000))' \
  "$TMP/probe.json" | record session

echo "== through runsnack cuda" >&2
RUNSNACK_CUDA_STATS=1 consumer cuda --json "$LINK" -- "$TMP/copy_bench" copy "$MIB" "$REPEATS" \
  >"$TMP/remote.out" 2>"$TMP/remote.err"
echo "remote copy: exit $?" >&2
record remote <"$TMP/remote.out"
RUNSNACK_CUDA_STATS=1 consumer cuda --json "$LINK" -- "$TMP/copy_bench" launch "$LAUNCHES" \
  >"$TMP/remote-launch.out" 2>"$TMP/remote-launch.err"
LAUNCH1=$?
echo "remote launch: exit $LAUNCH1" >&2
record remote <"$TMP/remote-launch.out"
RUNSNACK_CUDA_STATS=1 consumer cuda "$LINK" -- "$TMP/copy_bench" launch $((2 * LAUNCHES)) \
  >/dev/null 2>"$TMP/remote-launch2.err"
LAUNCH2=$?
# "runsnack cuda stats: N synchronous round trips, ..." (src/cuda/shim/client.cpp)
round_trips() { sed -n 's/^runsnack cuda stats: \([0-9]*\) synchronous round trips.*/\1/p' "$1" | tail -n 1; }
RT1=$(round_trips "$TMP/remote-launch.err")
RT2=$(round_trips "$TMP/remote-launch2.err")
if [[ $LAUNCH1 != 0 || $LAUNCH2 != 0 ]]; then
  echo "cuda_bench.sh: the launch runs failed (exit $LAUNCH1, $LAUNCH2): no round trips per launch" >&2
elif [[ -n $RT1 && -n $RT2 ]]; then
  awk -v a="$RT1" -v b="$RT2" -v n="$LAUNCHES" 'BEGIN { printf "RESULT round_trips_per_launch %.4f round-trips\n", (b - a) / n }' |
    record remote
else
  echo "cuda_bench.sh: the shim printed no stats line" >&2
fi
grep -h '^device 0' "$TMP/native.out" "$TMP/remote.out" >&2
echo "-- the shim's stderr:" >&2
cat "$TMP/remote.err" "$TMP/remote-launch.err" "$TMP/remote-launch2.err" >&2
tail -n 1 "$TMP/remote.out" >&2

# ---------------------------------------------------------------- the table
awk -v cores="$(nproc)" -v load="$(cut -d' ' -f1-3 /proc/loadavg)" '
  { v[$1 "," $2] = $3; unit[$2] = $4; if (!($2 in seen)) { seen[$2] = 1; order[n++] = $2 } }
  function get(k) { return (k in v) ? v[k] : "" }
  END {
    printf "\nRunSnack remote CUDA bench, 127.0.0.1, %d CPUs, load %s\n\n", cores, load
    printf "%-16s %12s %12s %10s  %s\n", "figure", "native", "runsnack", "remote/native", "unit"
    for (i = 0; i < n; i++) {
      k = order[i]
      if (k == "rtt" || k == "stream") continue
      a = get("native," k); b = get("remote," k)
      r = (a != "" && b != "" && a + 0 > 0) ? sprintf("%.2fx", b / a) : "n/a"
      printf "%-16s %12s %12s %10s  %s\n", k, a, b, r, unit[k]
    }
    s = get("session,stream")
    printf "\nsession stream (one stream, provider to consumer): %s GB/s; session RTT %s ms\n", s, get("session,rtt")
    h = get("remote,h2d_pinned")
    if (s != "" && h != "" && s + 0 > 0) printf "h2d pinned through runsnack cuda / session stream: %.2fx\n", h / s
  }' "$RESULTS"
