// RecordingOutbox: an Outbox for unit tests of the shard's rooms (no
// sockets): keeps every message sent, in order, with its connection and
// rank; says a connection is live unless the test marked it gone.
//
// Thread-safety: none (a test's own thread).
#pragma once

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "core/net/outbox.h"

namespace tether::testing {

class RecordingOutbox final : public Outbox {
 public:
  struct Sent {
    std::string identity;
    int rank = -1;
    MessageHeader header;
    std::string values;  // the values frame's bytes
  };

  RecordingOutbox() : Outbox("[test] ") {}

  void Send(const std::string& identity, Message* reply, int rank) override {
    sent.push_back({identity, rank, reply->header,
                    std::string(static_cast<const char*>(reply->values.data()), reply->values.size())});
  }
  bool ConnectionLive(const std::string& identity) override { return gone.count(identity) == 0; }

  /// The last message sent (the test checks one was).
  const Sent& last() const { return sent.back(); }
  /// The values of sent message i as floats.
  std::vector<float> floats(size_t i) const {
    std::vector<float> out(sent[i].values.size() / sizeof(float));
    if (!out.empty()) std::memcpy(out.data(), sent[i].values.data(), out.size() * sizeof(float));
    return out;
  }

  std::vector<Sent> sent;
  std::set<std::string> gone;  // connections ConnectionLive reports closed
};

}  // namespace tether::testing
