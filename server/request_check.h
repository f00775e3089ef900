// RequestCheck: what a shard checks of every request before any room acts
// on it (every input is untrusted): the sender's rank within
// cluster.max_workers and said HELLO from this very connection (only the
// peer that said HELLO as rank r may move r's clock or pull under r's
// bound); for PULL, PUSH and PUSH_DELTA a known table, sizes that agree
// with the table's (a dense push of this shard's slice, dim × keys
// values), a pull reply within the message limit, keys sorted, unique,
// this shard's and inside the table's key range; a push's values finite
// (one NaN would spread to every worker that pulls the row) and its
// push_weight finite and > 0. A refusal names the worker, the table and
// the first offending key or value.
//
// The scans run over every key and value of every request (10⁶ keys at dim
// 1, 2.6·10⁷ floats at 10⁵ × 64): branch-free block passes that only say
// whether something is wrong, then the exact position only if it is. No
// allocation (keys and values are read in place unless a frame is
// unaligned).
//
// Ownership: it holds references to the shard's tables and membership,
// which outlive it. Thread-safety: none (Run()'s thread).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/net/message.h"
#include "core/status.h"
#include "server/membership.h"
#include "server/table.h"

namespace tether {

class RequestCheck {
 public:
  /// Shard `shard` of `num_shards`; ranks in [0, max_workers), where
  /// `max_workers_set` says whether cluster.max_workers was given (named in
  /// the refusal: else it is cluster.num_workers).
  RequestCheck(int shard, int num_shards, int max_workers, bool max_workers_set,
               const std::vector<std::unique_ptr<ServerTable>>* tables, const Membership* members)
      : shard_(shard),
        num_shards_(num_shards),
        max_workers_(max_workers),
        max_workers_set_(max_workers_set),
        tables_(tables),
        members_(members) {}

  /// OK, or why request `m` from `identity` is refused (InvalidArgument
  /// for a malformed request, FailedPrecondition for one before its HELLO
  /// or from another connection than the rank's).
  Status Check(const std::string& identity, const Message& m) const;

 private:
  // Sizes, keys and key range of a PULL, PUSH or PUSH_DELTA.
  Status CheckTableRequest(const Message& m, const std::string& who) const;
  Status CheckKeys(const Message& m, const ServerTable& t, const std::string& who) const;
  // Values (finite), push_weight, and that the rank's own connection sent it.
  Status CheckPeer(const std::string& identity, const Message& m) const;

  int shard_, num_shards_, max_workers_;
  bool max_workers_set_;
  const std::vector<std::unique_ptr<ServerTable>>* tables_;
  const Membership* members_;
};

}  // namespace tether
