#!/usr/bin/env bash
# The interface the provider's cuda service uses, end to end without a GPU:
# `runsnack cuda-server --fd 3` (test double chosen by RUNSNACK_CUDA_BACKEND,
# stdout captured for device printf) serving the nvcc-built vector_add run
# with the shim. usage: cli_host_test.sh RUNSNACK_BIN SHIM_DIR VECTOR_ADD
set -euo pipefail
bin=$1 shim=$2 program=$3
work=$(mktemp -d)
trap 'kill $server 2>/dev/null || true; rm -rf "$work"' EXIT
RUNSNACK_CUDA_BACKEND=host python3 "$(dirname "$0")/serve_unix.py" "$bin" "$work/s" >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 100); do [ -S "$work/s" ] && break; sleep 0.1; done
set +e
LD_LIBRARY_PATH="$shim" RUNSNACK_CUDA_SOCKET="$work/s" RUNSNACK_CUDA_STRICT=1 "$program" >"$work/out" 2>&1
status=$?
set -e
cat "$work/out"
grep -q "device 0: RunSnack HostBackend (test double, runs only its test kernels)" "$work/out"
grep -q "round trip: ok" "$work/out"
grep -q "kernel: cudaSuccess" "$work/out"
grep -q "result: ok" "$work/out"
[ "$status" -eq 0 ]
# A bad fd is refused in one line, not served.
"$bin" cuda-server --fd 57 2>"$work/err" && exit 1
grep -q "fd 57 is not an open socket" "$work/err"
echo "cli_host_test: ok"
