// ClaimLookup: where a worker finds the process that claimed a replicated
// shard once the chain it knows has run out (docs/FAILOVER.md, "Replicated
// shards").
//
// A worker follows a replicated shard's chain as its primary last named it
// (RequestChannel, worker/client/request_channel.h). That view can be out
// of date: with --replicas=2, a copy that found the one before it answering
// drops its own copy and joins that claim again as a learner, on a new
// port; if the claimant dies before a worker heard from it, the worker's
// chain ends at the learner's old port, while the learner, caught up,
// claims the shard on its new one and publishes that port as the shard's
// rendezvous entry ("server-S", core/net/rendezvous.h). The channel asks
// Poll() about such a shard (its chain has no endpoint left and the last
// one followed does not answer); Poll() reads the shard's entry and reports
// an endpoint the worker has not been at yet for that shard: that is the
// claimant. The endpoints the worker has been at (the primary it joined,
// each one of the chain it followed) are told with Known(); an entry naming
// one of them (the primary's own, or the first claimant's, now dead) is no
// news.
//
// Reads are bounded: one per shard every `interval_ms` at most while Poll()
// is asked (the first at once), and the channel asks only until it gives
// the shard up (cluster.liveness_timeout_ms after the primary's
// disconnect). A failed read (no entry: a server that exited cleanly
// withdrew it; the store not answering; a value that is no endpoint) is
// logged once per run of failures, at WARNING, and tried again at the next
// interval.
//
// Ownership: a ClaimLookup owns its reader (and through it the Rendezvous).
// Thread-safety: none; the worker's channel thread only. Poll() blocks for
// one read at most (a file read, or one store round trip).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/net/server_lookup.h"

namespace tether {

class ClaimLookup {
 public:
  using Clock = std::chrono::steady_clock;
  /// Reads shard `shard`'s entry now (ReadServerEntry,
  /// core/net/server_lookup.h). Errors: any (the read is tried again).
  using ReadEntry = ServerLookup::ReadEntry;

  struct Options {
    /// A shard's entry is read at most this often while Poll() is asked
    /// about it (ms, > 0; default 100: the claimant publishes within
    /// milliseconds of its claim, and the worker gives the shard up after
    /// cluster.liveness_timeout_ms, at least 100 ms).
    int interval_ms = 100;
    /// Where the entries are, for messages ("rendezvous file:DIR").
    std::string source;
    /// Opens every log line ("[worker 0] ").
    std::string log_prefix;
  };

  /// `num_shards`: the job's server shards (cluster.num_servers). `read`:
  /// must not be empty.
  ClaimLookup(int num_shards, ReadEntry read, Options options);

  /// `endpoint` served `shard` for this worker or was followed for it: an
  /// entry naming it is not followed. A `shard` outside [0, num_shards())
  /// is ignored (Poll() answers nullopt for it).
  void Known(int shard, const std::string& endpoint);
  /// Asked while `shard`'s chain has run out, at time `now`: reads its
  /// entry when `interval_ms` passed since the last read (the first ask
  /// reads at once) and returns the entry's endpoint when it is a tcp:// or
  /// ipc:// endpoint not Known() for the shard; it is Known() from then on.
  /// Else nullopt.
  std::optional<std::string> Poll(int shard, Clock::time_point now);

  int num_shards() const { return static_cast<int>(shards_.size()); }
  const std::string& source() const { return options_.source; }
  /// Reads made so far, all shards (for tests and logs).
  uint64_t reads() const { return reads_; }

 private:
  struct Shard {
    std::set<std::string> known;
    bool read_once = false;
    Clock::time_point last_read;
    bool failing = false;  // the last read failed (its warning was logged)
  };

  ReadEntry read_;
  Options options_;
  std::vector<Shard> shards_;
  uint64_t reads_ = 0;
};

}  // namespace tether
