// WaitReport: decides when a long wait says that it is still waiting, and
// words what it waits for, so that a process blocked on a peer is never
// silent until its timeout ends it.
//
// Why: a worker whose servers are not up, or whose job waits for a worker
// that never joined, used to log nothing until cluster.startup_timeout_ms
// (a minute by default) ended the wait. A line soon after the wait starts,
// and then at a steady pace, names what is missing and how long until the
// process gives up, while there is still time to start it or fix a flag.
//
// Schedule: a wait started at t0 is due a line at t0 + first_ms, then at
// every multiple of every_ms after t0 (t0 + 10 s, + 20 s, ... by default).
// A wake-up that comes late gets one line, never a burst for the ticks it
// missed. The clock is the caller's: every call takes `now`, so tests drive
// it by hand.
//
// Bound: O(1) state. Thread-safety: none; one event loop owns an instance.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace tether {

class WaitReport {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    int64_t first_ms = 3000;   // the first line, this long after the wait began
    int64_t every_ms = 10000;  // then one at every multiple of this
  };

  WaitReport() : WaitReport(Options{}) {}
  explicit WaitReport(Options options) : options_(options) {}

  /// A wait begins at `now` (a wait already running starts over).
  void Start(Clock::time_point now);
  /// No wait is running: Due() says nothing until the next Start().
  void Stop() { running_ = false; }
  bool running() const { return running_; }

  /// Whether a line is due at `now`; when it is, the line counts as said
  /// and `*waited_ms` (when not null) gets the time since Start(). False
  /// while no wait runs.
  bool Due(Clock::time_point now, int64_t* waited_ms = nullptr);

  /// "10 s": a wait's length for a line, in whole seconds (rounded down).
  static std::string Seconds(int64_t ms);
  /// "0 at tcp://a, 1 at tcp://b": up to kListed items joined by ", ", then
  /// " and N more".
  static std::string List(const std::vector<std::string>& items);
  static constexpr size_t kListed = 5;

 private:
  Options options_;
  bool running_ = false;
  Clock::time_point start_{};
  int64_t next_ms_ = 0;  // since start_: when the next line is due
};

/// The line of a worker waiting for shards that never connected:
/// "waiting for server shard 1 at tcp://h:2 (no connection yet; 10 s of
/// cluster.startup_timeout_ms=60000)"; several shards: "server shards 0 at
/// A, 1 at B". `shards`: "N at ENDPOINT" items.
std::string WaitingForShardsLine(const std::vector<std::string>& shards, int64_t waited_ms, int64_t limit_ms);

/// The line of a worker whose requests have gone unanswered a while:
/// "waiting for server shard(s) 0, 1 to answer 2 request(s) (10 s; a server
/// holds its answer while a worker of the job has not joined or is behind
/// the staleness bound: the servers' logs name it; gives up after
/// cluster.request_timeout_ms=120000)".
std::string WaitingForRepliesLine(const std::vector<std::string>& shards, int requests, int64_t waited_ms,
                                  int64_t limit_ms);

/// The line of a server waiting for workers to join: "waiting for workers
/// 1 (of 2) to join: 10 s of cluster.startup_timeout_ms=60000". `ranks`:
/// rank items, each possibly followed by a note ("1 (refused: ...)").
std::string WaitingForWorkersLine(const std::vector<std::string>& ranks, int of, int64_t waited_ms,
                                  int64_t limit_ms);

}  // namespace tether
