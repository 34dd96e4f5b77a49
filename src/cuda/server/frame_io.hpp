// Blocking whole-buffer reads and writes on the cuda-server's socket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace runsnack::cuda {

// Writes all n bytes (retrying short writes and EINTR); false when the peer is gone.
bool write_all(int fd, const std::uint8_t* p, std::size_t n);
// 0: got n bytes; 1: EOF before the first byte; -1: error or EOF mid-way.
int read_all(int fd, std::uint8_t* p, std::size_t n);
// A frame's payload as it arrives: the buffer grows (at most doubling) only
// once what it holds has come, so a client announcing kMaxPayload and
// stalling makes us hold 64 KiB. The buffer is reused between frames.
// 0 when all `length` bytes came, -1 otherwise.
int read_payload(int fd, std::uint32_t length, std::vector<std::uint8_t>& payload);

}  // namespace runsnack::cuda
