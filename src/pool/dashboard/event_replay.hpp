#pragma once
// What a browser that connects late is sent after the snapshot, so its page
// shows the same as one that was open all along: the last `max_recent`
// events (the events feed) and the render preview's tiles ("tile_done"
// events), these bounded by their total size, oldest dropped first.
//
// Messages are shared, serialized once, between the replay and every
// client's queue. Not thread-safe (the dashboard's one executor).

#include <cstddef>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace runsnack::pool::dashboard {

using Message = std::shared_ptr<const std::string>;

class EventReplay {
 public:
  EventReplay(std::size_t max_recent, std::size_t max_tile_bytes);

  void add(std::string_view event_name, Message message);
  // The recent events, oldest first, then the kept tiles, oldest first.
  std::vector<Message> messages() const;
  std::size_t tile_bytes() const { return tile_bytes_; }

 private:
  std::size_t max_recent_, max_tile_bytes_;
  std::deque<Message> recent_, tiles_;
  std::size_t tile_bytes_ = 0;
};

}  // namespace runsnack::pool::dashboard
