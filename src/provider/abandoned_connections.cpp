#include "provider/abandoned_connections.hpp"

#include "provider/admission_audit.hpp"
#include "store/text.hpp"

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>

namespace runsnack {

bool closed_by_peer(const boost::system::error_code& ec) {
  namespace error = boost::asio::error;
  return ec == error::eof || ec == error::connection_reset || ec == error::broken_pipe ||
         ec == boost::asio::ssl::error::stream_truncated;
}

void AbandonTally::note(TimePoint when, const std::string& address_key, const std::string& path) {
  if (!started_) started_ = when;
  std::string key = address_key;
  if (!by_address_.contains(key) && by_address_.size() >= kMaxTallyAddresses) key = "(other addresses)";
  Tally& t = by_address_[key];
  if (t.count++ == 0) {
    t.first = when;
    t.path = path;
  }
  t.last = when;
}

std::vector<AuditEvent> AbandonTally::due(TimePoint now, bool all) {
  std::vector<AuditEvent> out;
  if (!started_ || (!all && now - *started_ < interval_)) return out;
  for (const auto& [key, t] : by_address_) {
    AuditEvent ev;
    ev.time = t.last;
    ev.kind = "connect";
    ev.address = key;
    ev.decision = "abandon";
    ev.reason = std::to_string(t.count) + (t.count == 1 ? " connection" : " connections") +
                " closed by the peer before authenticating (a consumer closes the addresses that lose its dial race)";
    ev.detail = {{"count", t.count}, {"first", rfc3339(t.first)}, {"last", rfc3339(t.last)}, {"path", t.path}};
    out.push_back(std::move(ev));
  }
  by_address_.clear();
  started_.reset();
  return out;
}

}  // namespace runsnack
