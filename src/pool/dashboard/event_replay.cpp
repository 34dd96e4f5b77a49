#include "pool/dashboard/event_replay.hpp"

namespace runsnack::pool::dashboard {

EventReplay::EventReplay(std::size_t max_recent, std::size_t max_tile_bytes)
    : max_recent_(max_recent), max_tile_bytes_(max_tile_bytes) {}

void EventReplay::add(std::string_view event_name, Message message) {
  if (event_name != "tile_done") {
    recent_.push_back(std::move(message));
    while (recent_.size() > max_recent_) recent_.pop_front();
    return;
  }
  if (message->size() > max_tile_bytes_) return;  // would evict everything and still not fit
  tile_bytes_ += message->size();
  tiles_.push_back(std::move(message));
  while (tile_bytes_ > max_tile_bytes_) {
    tile_bytes_ -= tiles_.front()->size();
    tiles_.pop_front();
  }
}

std::vector<Message> EventReplay::messages() const {
  std::vector<Message> out(recent_.begin(), recent_.end());
  out.insert(out.end(), tiles_.begin(), tiles_.end());
  return out;
}

}  // namespace runsnack::pool::dashboard
