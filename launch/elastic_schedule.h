// tether-launch --elastic_schedule (elastic membership, docs/OPERATIONS.md
// "Joining and leaving"): when to add workers with new ranks to a running
// job and when to stop some, by the job's epoch.
//
// Syntax: comma-separated "EPOCH:+N" (at the start of epoch EPOCH, 1-based,
// start N workers with the next unused ranks) and "EPOCH:-N" (stop the N
// most recently started workers still running, gracefully: SIGTERM, so each
// says BYE). Example "2:+2,4:-1". Epochs ≥ 2 (epoch 1 is the job's start,
// with cluster.num_workers workers); steps of one epoch apply in order.
//
// Ownership: returns values.
// Pure functions; no state, thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace tether {

struct ElasticStep {
  int epoch = 0;  // 1-based epoch at whose start the step applies
  int delta = 0;  // workers to add (> 0) or stop (< 0)
};

/// Parses `text` ("" gives no steps), sorted by epoch (stable). Checks that
/// the workers running never drop below 1 and that the ranks ever started
/// stay below `max_workers` (cluster.max_workers), starting from
/// `num_workers`. Errors: InvalidArgument naming the step and why.
StatusOr<std::vector<ElasticStep>> ParseElasticSchedule(const std::string& text, int num_workers, int max_workers);

}  // namespace tether
