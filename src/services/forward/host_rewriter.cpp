#include "services/forward/host_rewriter.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string_view>

namespace runsnack {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool contains_token(std::string_view value, std::string_view token) {
  std::size_t start = 0;
  while (start <= value.size()) {
    auto comma = value.find(',', start);
    auto item = trim(value.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (iequals(item, token)) return true;
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return false;
}

// "METHOD SP target SP HTTP/1.x"
bool is_request_line(std::string_view line) {
  auto sp1 = line.find(' ');
  auto sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp1 == 0 || sp2 == sp1) return false;
  auto method = line.substr(0, sp1);
  if (!std::all_of(method.begin(), method.end(), [](char c) { return std::isupper(static_cast<unsigned char>(c)); }))
    return false;
  auto version = line.substr(sp2 + 1);
  return version == "HTTP/1.1" || version == "HTTP/1.0";
}

}  // namespace

void HostRewriter::finish_headers(std::string& out) {
  std::string_view block = head_;
  // Lines, without the final empty one.
  std::string rewritten;
  rewritten.reserve(block.size() + host_.size() + 8);
  bool chunked = false, upgrade = false, have_host = false, first = true, bad = false;
  std::uint64_t length = 0;
  std::size_t pos = 0;
  for (;;) {
    auto end = block.find("\r\n", pos);
    std::string_view line = block.substr(pos, end - pos);
    pos = end + 2;
    if (line.empty()) break;  // end of the block
    if (first) {
      first = false;
      if (!is_request_line(line)) {
        bad = true;
        break;
      }
      if (line.starts_with("CONNECT ")) upgrade = true;
      rewritten.append(line).append("\r\n");
      continue;
    }
    auto colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      bad = true;
      break;
    }
    auto name = line.substr(0, colon);
    auto value = trim(line.substr(colon + 1));
    if (iequals(name, "host")) {
      if (!have_host) rewritten.append("Host: ").append(host_).append("\r\n");
      have_host = true;
      continue;
    }
    if (iequals(name, "content-length")) {
      std::uint64_t v = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || p != value.data() + value.size()) {
        bad = true;
        break;
      }
      length = v;
    } else if (iequals(name, "transfer-encoding")) {
      chunked = contains_token(value, "chunked");
    } else if (iequals(name, "upgrade")) {
      upgrade = true;
    }
    rewritten.append(line).append("\r\n");
  }
  if (bad) {  // not HTTP as we understand it: the server judges the bytes
    out.append(head_);
    head_.clear();
    state_ = State::tunnel;
    return;
  }
  if (!have_host) rewritten.append("Host: ").append(host_).append("\r\n");
  rewritten.append("\r\n");
  out.append(rewritten);
  head_.clear();
  ++requests_;
  if (upgrade) state_ = State::tunnel;
  else if (chunked) state_ = State::chunk_size;
  else if (length > 0) state_ = State::body, remaining_ = length;
  else state_ = State::headers;
}

void HostRewriter::finish_chunk_size(std::string& out) {
  std::string_view line(head_.data(), head_.size() - 2);
  line = line.substr(0, line.find(';'));
  line = trim(line);
  std::uint64_t size = 0;
  auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), size, 16);
  out.append(head_);
  head_.clear();
  if (line.empty() || ec != std::errc() || p != line.data() + line.size()) {
    state_ = State::tunnel;
    return;
  }
  if (size == 0) {
    state_ = State::trailers;
  } else {
    state_ = State::chunk_data;
    remaining_ = size;
  }
}

void HostRewriter::feed(std::span<const std::uint8_t> in, std::string& out) {
  const char* p = reinterpret_cast<const char*>(in.data());
  std::size_t n = in.size();
  while (n > 0) {
    switch (state_) {
      case State::tunnel:
        out.append(p, n);
        return;
      case State::body:
      case State::chunk_data: {
        std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, n));
        out.append(p, take);
        p += take, n -= take, remaining_ -= take;
        if (remaining_ == 0) {
          if (state_ == State::body) state_ = State::headers;
          else state_ = State::chunk_end;
        }
        break;
      }
      case State::headers: {
        // Empty lines between requests are allowed (RFC 9112 2.2): pass them.
        if (head_.empty() && (*p == '\r' || *p == '\n')) {
          out.push_back(*p);
          ++p, --n;
          break;
        }
        head_.push_back(*p);
        ++p, --n;
        if (head_.size() >= 4 && head_.compare(head_.size() - 4, 4, "\r\n\r\n") == 0) {
          finish_headers(out);
        } else if (head_.size() > kMaxHeaderBytes) {
          out.append(head_);
          head_.clear();
          state_ = State::tunnel;
        }
        break;
      }
      case State::chunk_size:
      case State::chunk_end:
      case State::trailers: {
        head_.push_back(*p);
        ++p, --n;
        bool line_done = head_.size() >= 2 && head_.compare(head_.size() - 2, 2, "\r\n") == 0;
        if (head_.size() > kMaxLineBytes) {
          out.append(head_);
          head_.clear();
          state_ = State::tunnel;
        } else if (line_done && state_ == State::chunk_size) {
          finish_chunk_size(out);
        } else if (line_done && state_ == State::chunk_end) {
          bool ok = head_ == "\r\n";
          out.append(head_);
          head_.clear();
          state_ = ok ? State::chunk_size : State::tunnel;
        } else if (line_done && state_ == State::trailers) {
          // Trailer lines until an empty one.
          bool done = head_ == "\r\n";
          out.append(head_);
          head_.clear();
          if (done) state_ = State::headers;
        }
        break;
      }
    }
  }
}

}  // namespace runsnack
