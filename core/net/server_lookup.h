// ServerLookup: a worker's second look at the rendezvous entries of server
// shards it waits for (core/net/rendezvous.h, docs/DEPLOY.md).
//
// A worker reads every shard's entry once at start-up. An entry can be
// stale: left by a server of an earlier run with the same job id and
// generation that died, it names a port nobody serves. When the real server
// starts later, or a shard's server comes back on another port, it rewrites
// the entry; the worker's RequestChannel asks Poll() about each shard that
// has never connected or is down, and moves the shard's socket to the
// endpoint Poll() reports. Poll() reads one shard's entry at most every
// `interval_ms` (500 ms by default), the first time one interval after it
// was first asked about the shard; a failed read (store not answering,
// file unreadable, a value that is no endpoint) keeps the endpoint known
// and doubles that shard's interval up to `max_interval_ms`, so a sick
// store is asked less and less. A new endpoint is reported once.
//
// What is done with a new endpoint is the caller's: the channel still
// checks that the process answering there is the one it joined
// (RequestChannel, SameServerProcess), so a server that restarted mid-job
// without the job's tables is refused as before.
//
// Ownership: a ServerLookup owns the reader it is given (and through it the
// Rendezvous of FromRendezvous). Thread-safety: none; one thread at a time
// (the worker's channel thread). Poll() blocks for one read at most: a file
// read, or one store round trip (about a second at most when the store does
// not answer).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace tether {

class Rendezvous;

class ServerLookup {
 public:
  using Clock = std::chrono::steady_clock;
  /// Reads shard `shard`'s entry now and returns its value. Errors: any
  /// (the entry is then kept as it was and the read tried again later).
  using ReadEntry = std::function<StatusOr<std::string>(int shard)>;

  struct Options {
    /// A shard's entry is read at most this often while Poll() is asked
    /// about it (ms, > 0).
    int interval_ms = 500;
    /// After failed reads in a row the interval doubles up to this (ms).
    int max_interval_ms = 8000;
    /// Where the entries are, for messages ("rendezvous file:DIR").
    std::string source;
    /// Opens every log line ("[worker 0] ").
    std::string log_prefix;
  };

  /// `endpoints`: the endpoint known for each shard, in shard order (the
  /// start-up lookup's). `read`: must not be empty.
  ServerLookup(std::vector<std::string> endpoints, ReadEntry read, Options options);

  /// Reads the entries of server shards in `rdzv` for (job_id, generation)
  /// (entry "server-S", ServerEntryName), each bounded by `read_timeout_ms`
  /// (a file backend never waits; a store backend waits this long plus a
  /// second for an answer). Takes `rdzv`.
  static std::unique_ptr<ServerLookup> FromRendezvous(std::unique_ptr<Rendezvous> rdzv, const std::string& job_id,
                                                      uint64_t generation, std::vector<std::string> endpoints,
                                                      Options options, int read_timeout_ms = 0);

  /// Asked while `shard` (in [0, num_shards())) waits for a connection, at
  /// time `now`. Reads its entry when its interval has passed since the
  /// last read (or since the first ask, which reads nothing), and returns
  /// the entry's endpoint when it differs from the one known, which it then
  /// becomes; else nullopt. A value that is not a tcp:// or ipc:// endpoint counts
  /// as a failed read (logged once per run of failures, at WARNING).
  std::optional<std::string> Poll(int shard, Clock::time_point now);

  int num_shards() const { return static_cast<int>(shards_.size()); }
  /// The endpoint known for `shard`: the start-up one or the last reported.
  const std::string& endpoint(int shard) const { return shards_[shard].endpoint; }
  /// Reads made so far, all shards (for tests and logs).
  uint64_t reads() const { return reads_; }
  /// `shard`'s interval now (ms): interval_ms, or more after failed reads.
  int interval_ms(int shard) const { return shards_[shard].interval_ms; }

 private:
  struct Shard {
    std::string endpoint;
    bool asked = false;  // Poll was asked about it (its clock runs)
    Clock::time_point last_read;
    int interval_ms = 0;
    bool failing = false;  // the last read failed (its warning was logged)
  };
  void ReadFailed(int shard, const Status& why);

  ReadEntry read_;
  Options options_;
  std::vector<Shard> shards_;
  uint64_t reads_ = 0;
};

/// A ServerLookup::ReadEntry that reads entry "server-S" of (job_id,
/// generation) in `rdzv`, each read bounded by `read_timeout_ms` (as
/// FromRendezvous). `rdzv` is shared by every reader made from it; use them
/// on one thread.
ServerLookup::ReadEntry ReadServerEntry(std::shared_ptr<Rendezvous> rdzv, const std::string& job_id,
                                        uint64_t generation, int read_timeout_ms = 0);

/// Whether `value`, read from `where` ("rendezvous SPEC, entry server-S"),
/// is an endpoint a worker can connect to. Errors: DataLoss for a value that
/// is not tcp:// or ipc://; those of CheckEndpoint (a host name that does
/// not resolve), naming `where`.
Status CheckServerEntry(const std::string& value, const std::string& where);

}  // namespace tether
