// The shim's one connection per process to the cuda server, named by
// $RUNSNACK_CUDA_SOCKET. Synchronous calls flush the coalesced send buffer
// and wait for their reply; fire-and-forget calls only append to it.
#pragma once

#include "cuda/wire.hpp"

#include <cstdint>
#include <functional>
#include <vector>

namespace runsnack::cuda::shim {

using Fill = std::function<void(wire::Writer&)>;

// Connects and says Hello once; later calls return the first result.
int init();
bool initialised();
const std::vector<wire::DeviceInfo>& devices();
int driver_version();

// A synchronous request; on success `reply` holds the fields after the result.
int call(wire::Op op, const Fill& fill, std::vector<std::uint8_t>* reply = nullptr);
// `n` synchronous requests sent together, their replies read in order: one
// round trip's latency for all of them. Returns the first failure.
int call_many(wire::Op op, std::size_t n, const std::function<void(std::size_t, wire::Writer&)>& fill,
              const std::function<void(std::size_t, const std::vector<std::uint8_t>&)>& on_reply);
// A fire-and-forget request (its error comes back with a later call).
int post(wire::Op op, const Fill& fill);
// Streams a module image to the server's staging buffer in kChunk pieces.
int upload_image(const void* image, std::size_t size);

// The calling thread's current context handle (0: none) and its stack.
std::uint64_t current_ctx();
void set_current_ctx(std::uint64_t ctx);
void push_ctx(std::uint64_t ctx);
std::uint64_t pop_ctx();

// Loud, once-per-key diagnostics on stderr; fatal under RUNSNACK_CUDA_STRICT=1.
void warn_once(const char* what, const char* name);
bool strict();
// RUNSNACK_CUDA_TRACE=1: log every cuGetProcAddress and cuGetExportTable request.
bool trace();

}  // namespace runsnack::cuda::shim
