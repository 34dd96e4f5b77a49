#include "cli/raw_terminal.hpp"

#include <unistd.h>

namespace runsnack::cli {

RawTerminal::RawTerminal(int fd) : fd_(fd) {
  if (!::isatty(fd) || ::tcgetattr(fd, &saved_) != 0) return;
  termios raw = saved_;
  ::cfmakeraw(&raw);
  raw.c_cc[VMIN] = 1;
  raw.c_cc[VTIME] = 0;
  active_ = ::tcsetattr(fd, TCSADRAIN, &raw) == 0;
}

RawTerminal::~RawTerminal() {
  if (active_) ::tcsetattr(fd_, TCSADRAIN, &saved_);
}

}  // namespace runsnack::cli
