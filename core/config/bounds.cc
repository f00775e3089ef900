// Upper and lower bounds of a job config's counts, sizes and durations
// (core/config.h, ValidateCountBounds and ValidateDurations): a value past
// them would allocate per-rank state the host cannot hold, overflow a
// value derived from it, or turn a timeout into none.
#include "core/config.h"

#include <string>
#include <utility>

namespace tether {
namespace {

Status FieldError(const std::string& field, const std::string& why) {
  return Status::InvalidArgument("config field " + field + ": " + why);
}

// "is V, above the limit L (what)".
Status AboveLimit(const std::string& field, int64_t value, int64_t limit, const std::string& what) {
  return FieldError(field, "is " + std::to_string(value) + ", above the limit " + std::to_string(limit) + " (" +
                               what + ")");
}

// train.threads: each worker starts this many compute threads; a host's
// cores bound what they gain, and the bound is the same on every host so a
// config valid where it is checked is valid where it runs.
constexpr int kMaxWorkerThreads = 1024;

}  // namespace

Status ValidateCountBounds(const JobConfig& c) {
  const ClusterConfig& k = c.cluster();
  if (k.num_servers() > kMaxJobRanks)
    return AboveLimit("cluster.num_servers", k.num_servers(), kMaxJobRanks,
                      "every worker keeps a connection and request state per shard");
  for (const auto& [field, value] : {std::pair<const char*, int>{"cluster.num_workers", k.num_workers()},
                                     {"cluster.max_workers", k.max_workers()}})
    if (value > kMaxJobRanks)
      return AboveLimit(field, value, kMaxJobRanks, "every shard keeps a clock and a slot per worker rank");
  // ZeroMQ takes 0 as "no limit" and refuses a negative mark.
  for (const auto& [field, value] : {std::pair<const char*, int>{"cluster.send_hwm", k.send_hwm()},
                                     {"cluster.recv_hwm", k.recv_hwm()}})
    if (value < 0)
      return FieldError(field, "must be ≥ 0 messages (0: no limit), got " + std::to_string(value));
  const TrainConfig& t = c.train();
  for (const auto& [field, value] : {std::pair<const char*, int>{"train.minibatch_size", t.minibatch_size()},
                                     {"train.eval_minibatch_size", t.eval_minibatch_size()}})
    if (value > kMaxMinibatchRows)
      return AboveLimit(field, value, kMaxMinibatchRows, "rows per minibatch");
  if (t.threads() > kMaxWorkerThreads)
    return AboveLimit("train.threads", t.threads(), kMaxWorkerThreads,
                      "compute threads each worker starts; past its host's cores they only contend for them");
  return Status::OK();
}

Status ValidateDurations(const JobConfig& c) {
  const ClusterConfig& k = c.cluster();
  // A timeout of 0 or less would wait for nothing or, handed to ZeroMQ or
  // poll(2) as -1, forever.
  for (const auto& [field, value] :
       {std::pair<const char*, int>{"cluster.request_timeout_ms", k.request_timeout_ms()},
        {"cluster.startup_timeout_ms", k.startup_timeout_ms()},
        {"cluster.idle_timeout_ms", k.idle_timeout_ms()},
        {"cluster.heartbeat_interval_ms", k.heartbeat_interval_ms()},
        {"cluster.worker_timeout_ms", k.worker_timeout_ms()}})
    if (value < 1) return FieldError(field, "must be ≥ 1 ms, got " + std::to_string(value));
  if (k.debug_request_delay_ms() < 0)
    return FieldError("cluster.debug_request_delay_ms",
                      "must be ≥ 0 ms (0: no delay), got " + std::to_string(k.debug_request_delay_ms()));
  return Status::OK();
}

}  // namespace tether
