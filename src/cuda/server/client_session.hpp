// One client connection of the cuda-server: its handles, contexts, staged module image and
// latched error; executes each request frame on the Backend and writes the reply.
#pragma once

#include "cuda/server/backend.hpp"
#include "cuda/server/handles.hpp"
#include "cuda/server/stdout_capture.hpp"
#include "cuda/wire.hpp"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace runsnack::cuda {

class ClientSession {
 public:
  ClientSession(int fd, Backend& b, StdoutCapture* capture) : fd_(fd), b_(b), capture_(capture) {}
  ~ClientSession() { cleanup(); }

  // Executes one request; returns an error message for a malformed one.
  std::string handle(const wire::Header& h, const std::uint8_t* payload);

 private:
  // Makes the request's context current; returns its backend value's result.
  int use_ctx(std::uint64_t ctx) {
    if (ctx == 0) return 0;
    const auto* e = handles_.get(ctx, Kind::Context);
    if (e == nullptr) e = handles_.get(ctx, Kind::PrimaryContext);
    if (e == nullptr) return kErrInvalidContext;
    if (current_ == ctx) return 0;
    int rc = b_.set_current(e->value);
    if (rc == 0) current_ = ctx;
    return rc;
  }
  int stream(std::uint64_t h, std::uint64_t& out) const {
    if (h <= 2) {
      out = h;
      return 0;
    }
    const auto* e = handles_.get(h, Kind::Stream);
    if (e == nullptr) return kErrInvalidHandle;
    out = e->value;
    return 0;
  }
  int lookup(std::uint64_t h, Kind k, std::uint64_t& out) const {
    const auto* e = handles_.get(h, k);
    if (e == nullptr) return kErrInvalidHandle;
    out = e->value;
    return 0;
  }
  int function(std::uint64_t h, std::uint64_t& out, bool& is_kernel) const {
    is_kernel = false;
    if (lookup(h, Kind::Function, out) == 0) return 0;
    is_kernel = true;
    return lookup(h, Kind::Kernel, out);
  }
  std::uint64_t give(Kind k, std::uint64_t value) {
    if (auto h = handles_.find_value(k, value)) return *h;
    return handles_.add(k, value, current_);
  }
  void write_params(wire::Writer& w, std::uint64_t fn, bool is_kernel) {
    std::vector<wire::Param> params;
    // A backend that cannot tell the layout reports none; the client then
    // sends an empty buffer and the launch fails on the server, not silently.
    if (b_.param_info(fn, is_kernel, params) != 0) params.clear();
    w.array(params);
  }
  int staged(const std::vector<std::uint8_t>*& image) {
    if (image_.size() != image_expected_ || image_.empty()) return kErrInvalidImage;
    image = &image_;
    return 0;
  }
  // Runs one request on the backend (client_session_ops.cpp); 0 or the CUDA error code.
  int execute(wire::Op op, wire::Reader& r, wire::Writer& w);
  // Frees what this connection made, dependents first.
  void cleanup();

  int fd_;
  Backend& b_;
  HandleTable handles_;
  std::set<std::uint64_t> memory_;
  std::map<int, int> primary_retains_;
  std::uint64_t current_ = 0;
  int latched_ = 0;
  std::vector<std::uint8_t> image_;
  std::uint64_t image_expected_ = 0;
  StdoutCapture* capture_;
};

}  // namespace runsnack::cuda
