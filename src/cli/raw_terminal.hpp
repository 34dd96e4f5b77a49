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

// Turns a terminal's echo off (line editing and Ctrl-C stay) while a secret
// is typed or pasted, and back on in the destructor, or when SIGINT,
// SIGTERM or SIGHUP ends the process meanwhile (the signal is then raised
// again with its default action). One at a time. Not copyable.
class HiddenInput {
 public:
  // Does nothing when `fd` is not a terminal (active() is then false).
  explicit HiddenInput(int fd);
  HiddenInput(const HiddenInput&) = delete;
  HiddenInput& operator=(const HiddenInput&) = delete;
  ~HiddenInput();

  bool active() const { return active_; }

 private:
  bool active_ = false;
};

}  // namespace runsnack::cli
