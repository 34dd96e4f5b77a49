#pragma once
// The "cuda" service: transparent remote CUDA (issue 8). The consumer's
// program runs on the consumer with RunSnack's libcuda.so.1; each of its
// connections becomes one stream, and the provider runs one cuda-server
// process per stream that owns the GPU context. This service only relays
// bytes; the CUDA wire protocol is between the shim and the server.
//
//   consumer -> header {"service":"cuda","args":{}}
//   provider -> {"ok":true}                 (the stream header reply; the grant allows "cuda")
//   provider -> {"ok":true,"pid":N,"backend":"driver"|"host"}   the server runs; raw bytes follow both ways
//             | {"ok":false,"code":"...","reason":"..."} then FIN
//   or, to check before starting a program:
//   consumer -> header {"service":"cuda","args":{"check":true}}
//   provider -> {"ok":true,"cuda":CudaAvailability} then FIN
//
// The server is `/proc/self/exe cuda-server --fd 3`, its end of a socketpair
// on descriptor 3, in its own cgroup with the grant's run limits (memory,
// processes; rlimits where no cgroup can be made) and wall-clock limit, the
// grant's GPUs as CUDA_VISIBLE_DEVICES, the real driver on its library path
// (server_env.hpp), the grant's bandwidth limit on the relay. The consumer's
// FIN is the server's EOF; a reset stream or a lost session kills it at
// once. The server's exit ends the stream. Either way it is reaped, and the
// GPU memory it held is freed with it. Audit: cuda_start and cuda_end
// (exit status, seconds, bytes each way, peak memory, why it ended).
// At most kMaxServersPerSession servers per session.

#include "core/error.hpp"
#include "crypto/peer_id.hpp"
#include "link/grant.hpp"
#include "net/mux_stream.hpp"
#include "services/common/cuda_availability.hpp"
#include "services/common/session_limiter.hpp"
#include "session/service.hpp"
#include "session/session.hpp"

#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

namespace runsnack::cuda {

using runsnack::kServiceCuda;       // services/common/cuda_availability.hpp
using runsnack::cuda_availability;  // what info and the check report
// How long a server may take to exit after its input ended before it is killed.
inline constexpr std::chrono::milliseconds kServerExitGrace{3000};
// Servers (CUDA contexts: each costs GPU memory) one session may run at once. The host test
// backend's memory per server is 1 GiB / 16 (cuda/server/host_backend.hpp): change both together.
inline constexpr int kMaxServersPerSession = 16;
// Each pump direction moves up to this much at once (both halves): CUDA
// traffic is either small calls or large copies, and one read then one write
// per large chunk keeps a copy at the session's speed.
inline constexpr std::size_t kPumpBytes = 1024 * 1024;

// Provider half. A free function with by-value parameters (GCC 12 coroutine rule).
// `limiter`: servers per session and their shared bandwidth bucket (services/common).
boost::asio::awaitable<void> serve_cuda_stream(std::shared_ptr<SessionLimiter> limiter,
                                               std::shared_ptr<MuxStream> stream, nlohmann::json args,
                                               ServiceContext context);

// Consumer halves. Both fail with errc::refused and the provider's reason
// when the link does not allow cuda or the server cannot start.
boost::asio::awaitable<Result<nlohmann::json>> check_cuda(Session& session);
// A stream to a new cuda-server, opened without waiting for the provider's answers: the program's
// first calls (cuInit's Hello) follow the header at once and reach the server when it has started.
// session.answers(stream, kServiceCuda) (the header's answer, then whether the server started)
// comes before anything else read from the stream.
boost::asio::awaitable<Result<std::shared_ptr<MuxStream>>> open_cuda(Session& session);

}  // namespace runsnack::cuda
