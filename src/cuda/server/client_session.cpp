// ClientSession: one request in, its reply (and captured device printf output) out; cleanup at the end.
#include "cuda/server/client_session.hpp"

#include "cuda/server/frame_io.hpp"

#include <algorithm>
#include <cstring>

namespace runsnack::cuda {

using wire::Op;

std::string ClientSession::handle(const wire::Header& h, const std::uint8_t* payload) {
  wire::Reader r(payload, h.length);
  std::vector<std::uint8_t> out;
  wire::Writer w(out);
  w.frame(Op::Reply, 0, h.seq);
  w.i32(0);  // result, patched below
  int rc = 0;
  bool sync = h.flags & wire::kFlagReply;
  if (sync && latched_ != 0) {
    // An earlier fire-and-forget request failed: report it now, run nothing.
    rc = latched_;
    latched_ = 0;
    out.resize(wire::kHeaderSize + 4);
  } else {
    rc = execute(h.op, r, w);
    if (r.failed() || !r.at_end()) {
      return std::string("cuda wire: malformed ") + wire::op_name(h.op) + " request";
    }
    if (rc != 0) out.resize(wire::kHeaderSize + 4);  // no results after a failure
  }
  if (!sync) {
    if (rc != 0 && latched_ == 0) latched_ = rc;
    return {};
  }
  std::memcpy(out.data() + wire::kHeaderSize, &rc, 4);
  w.finish();
  if (capture_ != nullptr) {
    // Device printf output first, so the client sees it before this reply.
    auto printed = capture_->take();
    std::vector<std::uint8_t> frames;
    wire::Writer o(frames);
    for (std::size_t off = 0; off < printed.size(); off += wire::kChunk) {
      o.frame(Op::Output, 0, 0);
      o.raw(printed.data() + off, std::min(wire::kChunk, printed.size() - off));
      o.finish();
    }
    if (!write_all(fd_, frames.data(), frames.size())) return "cuda server: the client went away";
  }
  if (!write_all(fd_, out.data(), out.size())) return "cuda server: the client went away";
  return {};
}

void ClientSession::cleanup() {
  for (Kind k : {Kind::Event, Kind::Stream}) {
    for (const auto& [h, e] : handles_.of_kind(k)) {
      use_ctx(e.owner);
      if (k == Kind::Event) b_.event_destroy(e.value);
      else b_.stream_destroy(e.value);
    }
  }
  for (auto p : memory_) b_.mem_free(p);
  memory_.clear();
  for (const auto& [h, e] : handles_.of_kind(Kind::Module)) b_.module_unload(e.value);
  for (const auto& [h, e] : handles_.of_kind(Kind::Library)) b_.library_unload(e.value);
  for (const auto& [h, e] : handles_.of_kind(Kind::Context)) b_.ctx_destroy(e.value);
  for (auto& [dev, n] : primary_retains_) {
    for (; n > 0; --n) b_.primary_ctx_release(dev);
  }
  handles_ = HandleTable{};
}

}  // namespace runsnack::cuda
