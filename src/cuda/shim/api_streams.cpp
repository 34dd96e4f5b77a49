// Driver API: streams, events and error names.
#include "cuda/shim/api_internal.hpp"

namespace shim = runsnack::cuda::shim;
namespace wire = runsnack::cuda::wire;
using wire::Op;
using namespace runsnack::cuda::shim::api;

namespace {

CUresult sync_stream(std::uint64_t stream) {
  std::uint64_t ctx = shim::current_ctx();
  return R(shim::call(Op::StreamSynchronize, [&](wire::Writer& w) { w.u64(ctx), w.u64(stream); }));
}

}  // namespace

// ---- streams and events ----
API cuStreamCreateWithPriority(CUstream* s, unsigned int flags, int priority) {
  if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::uint8_t> reply;
  std::uint64_t ctx = shim::current_ctx();
  int rc = shim::call(Op::StreamCreate, [&](wire::Writer& w) { w.u64(ctx), w.u32(flags), w.i32(priority); }, &reply);
  if (rc == 0) *s = as<CUstream>(read_u64(reply));
  return R(rc);
}
API cuStreamCreate(CUstream* s, unsigned int flags) { return cuStreamCreateWithPriority(s, flags, 0); }
API cuStreamDestroy_v2(CUstream s) {
  return R(shim::post(Op::StreamDestroy, [&](wire::Writer& w) { w.u64(u(s)); }));
}
API cuStreamSynchronize(CUstream s) { return sync_stream(u(s)); }
API cuStreamSynchronize_ptsz(CUstream s) { return sync_stream(stream_of(s, true)); }
API cuStreamQuery(CUstream s) {
  std::uint64_t ctx = shim::current_ctx();
  return R(shim::call(Op::StreamQuery, [&](wire::Writer& w) { w.u64(ctx), w.u64(u(s)); }));
}
API cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
  std::uint64_t ctx = shim::current_ctx();
  return R(shim::post(Op::StreamWaitEvent, [&](wire::Writer& w) { w.u64(ctx), w.u64(u(s)), w.u64(u(e)), w.u32(flags); }));
}
API cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int flags) {
  return cuStreamWaitEvent(as<CUstream>(stream_of(s, true)), e, flags);
}
// Stream capture (CUDA graphs) is not supported yet: no stream is ever capturing.
API cuStreamIsCapturing(CUstream, CUstreamCaptureStatus* status) {
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
API cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus* status) { return cuStreamIsCapturing(s, status); }
API cuEventCreate(CUevent* e, unsigned int flags) {
  if (e == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::uint8_t> reply;
  std::uint64_t ctx = shim::current_ctx();
  int rc = shim::call(Op::EventCreate, [&](wire::Writer& w) { w.u64(ctx), w.u32(flags); }, &reply);
  if (rc == 0) *e = as<CUevent>(read_u64(reply));
  return R(rc);
}
API cuEventDestroy_v2(CUevent e) {
  return R(shim::post(Op::EventDestroy, [&](wire::Writer& w) { w.u64(u(e)); }));
}
API cuEventRecord(CUevent e, CUstream s) {
  std::uint64_t ctx = shim::current_ctx();
  return R(shim::post(Op::EventRecord, [&](wire::Writer& w) { w.u64(ctx), w.u64(u(e)), w.u64(u(s)); }));
}
API cuEventRecord_ptsz(CUevent e, CUstream s) { return cuEventRecord(e, as<CUstream>(stream_of(s, true))); }
API cuEventSynchronize(CUevent e) {
  return R(shim::call(Op::EventSynchronize, [&](wire::Writer& w) { w.u64(u(e)); }));
}
API cuEventQuery(CUevent e) { return R(shim::call(Op::EventQuery, [&](wire::Writer& w) { w.u64(u(e)); })); }
API cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) {
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::vector<std::uint8_t> reply;
  int rc = shim::call(Op::EventElapsedTime, [&](wire::Writer& w) { w.u64(u(a)), w.u64(u(b)); }, &reply);
  if (rc == 0 && reply.size() >= 4) std::memcpy(ms, reply.data(), 4);
  return R(rc);
}
#undef cuEventElapsedTime  // the pre-12.8 entry point under its own name
extern "C" __attribute__((visibility("default"))) CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
  return cuEventElapsedTime_v2(ms, a, b);
}

// ---- errors ----
API cuGetErrorName(CUresult e, const char** s) {
  if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
  switch (e) {
#define N(x) case x: *s = #x; return CUDA_SUCCESS;
    N(CUDA_SUCCESS) N(CUDA_ERROR_INVALID_VALUE) N(CUDA_ERROR_OUT_OF_MEMORY) N(CUDA_ERROR_NOT_INITIALIZED)
    N(CUDA_ERROR_NO_DEVICE) N(CUDA_ERROR_INVALID_DEVICE) N(CUDA_ERROR_INVALID_IMAGE) N(CUDA_ERROR_INVALID_CONTEXT)
    N(CUDA_ERROR_INVALID_HANDLE) N(CUDA_ERROR_NOT_FOUND) N(CUDA_ERROR_NOT_READY) N(CUDA_ERROR_NOT_SUPPORTED)
    N(CUDA_ERROR_LAUNCH_FAILED) N(CUDA_ERROR_ILLEGAL_ADDRESS) N(CUDA_ERROR_UNKNOWN)
#undef N
    default: *s = "CUDA_ERROR (see cuda.h)"; return CUDA_SUCCESS;
  }
}
API cuGetErrorString(CUresult e, const char** s) {
  if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (e == CUDA_ERROR_NOT_SUPPORTED) {
    *s = "operation not supported (by the remote GPU or by RunSnack's shim yet)";
    return CUDA_SUCCESS;
  }
  return cuGetErrorName(e, s);
}
