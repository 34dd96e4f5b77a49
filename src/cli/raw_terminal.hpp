#pragma once
// Puts a terminal in raw mode (no echo, no line editing, no signals from
// keys: Ctrl-C travels as a byte) for as long as the object lives, and
// restores the saved settings in the destructor, so every way out of a scope
// (return, exception) gives the user their terminal back. Not copyable.

#include <termios.h>

namespace runsnack::cli {

class RawTerminal {
 public:
  // Does nothing when `fd` is not a terminal (active() is then false).
  explicit RawTerminal(int fd);
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;
  ~RawTerminal();

  bool active() const { return active_; }

 private:
  int fd_;
  bool active_ = false;
  termios saved_{};
};

}  // namespace runsnack::cli
