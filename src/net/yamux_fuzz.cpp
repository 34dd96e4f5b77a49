// libFuzzer: random bytes as a stream of yamux frames into the decoder and the
// state machine, interleaved with local operations chosen by the input, as
// the Mux would drive them. Nothing may crash, and the invariants below hold.
#include "net/yamux_state.hpp"

#include <cstdlib>
#include <span>

using namespace runsnack::yamux;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  MuxLimits limits;
  limits.max_streams = 16;
  limits.accept_backlog = 4;
  limits.max_window = 1024 * 1024;
  MuxState state(size > 0 && (data[0] & 1) ? Role::client : Role::server, limits);
  std::vector<FrameHeader> out;
  SteadyTime now{};
  std::uint32_t last_stream = 0;
  std::size_t i = size > 0 ? 1 : 0;
  while (i + kHeaderSize <= size) {
    auto h = decode_header(std::span<const std::uint8_t, kHeaderSize>(data + i, kHeaderSize));
    i += kHeaderSize;
    now += std::chrono::microseconds(data[i - 1]);
    if (!h) {
      // A local operation instead, picked by the bad byte.
      std::uint8_t op = data[i - 11];
      if (op % 5 == 0) (void)state.open(out);
      else if (op % 5 == 1) (void)state.next_data(last_stream, data[i - 2] * 1000u);
      else if (op % 5 == 2) (void)state.close_write(last_stream);
      else if (op % 5 == 3) (void)state.consumed(last_stream, data[i - 3] * 1000u, now);
      else state.accepted(last_stream, out);
      continue;
    }
    Inbound in = state.on_frame(*h, now, out);
    if (in.fault) break;  // the Mux closes the connection here
    if (in.stream_id) last_stream = in.stream_id;
    if (in.deliver > limits.max_window) std::abort();
    // The payload follows the header; skip what is there.
    std::size_t skip = std::max(in.deliver, in.discard);
    i += std::min(skip, size - i);
    if (state.stream_count() > limits.max_streams) std::abort();
    if (state.recv_window_size(last_stream) > limits.max_window) std::abort();
    if (out.size() > 4096) out.clear();
  }
  return 0;
}
