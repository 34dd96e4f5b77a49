#include "cli/raw_terminal.hpp"

#include <csignal>
#include <unistd.h>

namespace runsnack::cli {

namespace {
// HiddenInput's terminal, for its signal handler (async-signal-safe calls only).
int hidden_fd = -1;
termios hidden_saved{};
constexpr int kHiddenSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction hidden_previous[3];

void restore_echo_and_die(int sig) {
  ::tcsetattr(hidden_fd, TCSANOW, &hidden_saved);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}
}  // namespace

HiddenInput::HiddenInput(int fd) {
  if (hidden_fd >= 0 || !::isatty(fd) || ::tcgetattr(fd, &hidden_saved) != 0) return;
  hidden_fd = fd;
  struct sigaction sa {};
  sa.sa_handler = restore_echo_and_die;
  ::sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 3; ++i) ::sigaction(kHiddenSignals[i], &sa, &hidden_previous[i]);
  termios quiet = hidden_saved;
  quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO | ECHOE | ECHOK | ECHONL);
  active_ = ::tcsetattr(fd, TCSANOW, &quiet) == 0;
  if (!active_) {
    for (int i = 0; i < 3; ++i) ::sigaction(kHiddenSignals[i], &hidden_previous[i], nullptr);
    hidden_fd = -1;
  }
}

HiddenInput::~HiddenInput() {
  if (!active_) return;
  ::tcsetattr(hidden_fd, TCSANOW, &hidden_saved);
  for (int i = 0; i < 3; ++i) ::sigaction(kHiddenSignals[i], &hidden_previous[i], nullptr);
  hidden_fd = -1;
}

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
