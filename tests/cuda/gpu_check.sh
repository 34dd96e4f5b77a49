#!/usr/bin/env bash
# Remote CUDA on a machine with a GPU: builds the tests/cuda programs with
# nvcc, runs each natively and through the shim against `runsnack cuda-server`
# on the real driver (over a unix socket, as the provider's service would),
# and compares the outputs line for line.
#   tests/cuda/gpu_check.sh [RUNSNACK_BIN]   (default build/release/src/cli/runsnack)
# The shim directory is found beside the binary (../../cuda-shim) unless
# RUNSNACK_CUDA_LIBDIR is set. Exit status 0 only when every program matches.
set -uo pipefail
cd "$(dirname "$0")/../.."
bin=$(realpath "${1:-build/release/src/cli/runsnack}")
shim=${RUNSNACK_CUDA_LIBDIR:-$(dirname "$bin")/../../cuda-shim}
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuda_lib=$(dirname "$nvcc")/../lib64
work=$(mktemp -d)
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
[ -x "$bin" ] || { echo "no runsnack binary at $bin"; exit 2; }
[ -f "$shim/libcuda.so.1" ] || { echo "no shim at $shim (build the runsnack_cuda_shim target)"; exit 2; }
nvidia-smi -L || { echo "no GPU here"; exit 2; }

build() {  # name source [extra nvcc args]
  local name=$1 src=$2; shift 2
  "$nvcc" -O2 -o "$work/$name" "tests/cuda/$src" -Xlinker -rpath -Xlinker "$cuda_lib" "$@" || { echo "build $name: FAILED"; exit 2; }
}
build vector_add_static vector_add.cu
build vector_add_shared vector_add.cu -cudart shared
build cublas_sgemm cublas_sgemm.cu -lcublas
build streams_events streams_events.cu

python3 tests/cuda/serve_unix.py "$bin" "$work/cuda.sock" driver >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 50); do [ -S "$work/cuda.sock" ] && break; sleep 0.1; done

failed=0
for p in vector_add_static vector_add_shared cublas_sgemm streams_events; do
  timeout 120 "$work/$p" >"$work/$p.native" 2>&1; native=$?
  LD_LIBRARY_PATH="$shim" RUNSNACK_CUDA_SOCKET="$work/cuda.sock" RUNSNACK_CUDA_STRICT=1 \
    timeout 300 "$work/$p" >"$work/$p.remote" 2>&1; remote=$?
  if [ $native -eq 0 ] && [ $remote -eq 0 ] && diff -q "$work/$p.native" "$work/$p.remote" >/dev/null; then
    echo "$p: PASS ($(tail -1 "$work/$p.native"))"
  else
    failed=1
    echo "$p: FAIL (native exit $native, remote exit $remote)"
    diff "$work/$p.native" "$work/$p.remote" | head -20
  fi
done
echo "--- server log"; tail -20 "$work/server.log"
exit $failed
