// Learning-rate schedules: the factor a parameter-server shard multiplies a
// push's step by, as a function of the clock the push was computed at
// (LearningRateSchedule in proto/tables.proto says the shapes and cites the
// sources: a linear warm-up, Goyal et al. 2017; a cosine decay, Loshchilov &
// Hutter, ICLR 2017; or a linear one). The checks and the epochs-to-clocks
// step of a job config are core/schedule_config.h's.
//
// Pure functions of their arguments: thread-safe, no state, no ownership.
#pragma once

#include <cstdint>
#include <string>

#include "proto/tables.pb.h"

namespace tether {

/// The factor in [0, 1] for a push computed at `clock` (≥ 0; a negative
/// clock counts as 0) under `schedule` (its clock fields; the epoch fields
/// must have been resolved, ResolveScheduleEpochs): 1 for a default (unset)
/// schedule, so a job without one steps exactly as before. Computed in
/// double and rounded once to float: the same on every shard.
float ScheduleFactor(const LearningRateSchedule& schedule, int64_t clock);

/// "cosine decay over 300 clocks to 0.1 after a 39-clock warm-up", for logs.
std::string DescribeSchedule(const LearningRateSchedule& schedule);

}  // namespace tether
