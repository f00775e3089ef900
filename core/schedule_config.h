// Learning-rate schedules as configured (LearningRateSchedule in
// proto/tables.proto): their checks, and the epochs a job config may give
// turned into the clocks a shard reads. The factor itself is computed by
// optim/schedule.h.
//
// Pure functions of their arguments: thread-safe, no state, no ownership.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "proto/tables.pb.h"

namespace tether {

/// Whether the schedule changes any step (a warm-up or a decay is set).
bool ScheduleActive(const LearningRateSchedule& schedule);

/// Turns warmup_epochs and decay_epochs (when set) into warmup_clocks and
/// decay_clocks at `clocks_per_epoch` clocks per epoch (≥ 1), rounding to
/// the nearest clock; `epochs` (train.epochs) gives decay_epochs' default
/// (the epochs left after the warm-up) when a decay is set without it. The
/// epoch fields are cleared, so the result is what a shard reads. Errors:
/// InvalidArgument naming the field (`where`, e.g. "optimizer.schedule")
/// when an epoch field is negative or not finite, or when a field is given
/// both in epochs and in clocks.
[[nodiscard]] Status ResolveScheduleEpochs(LearningRateSchedule* schedule, int64_t clocks_per_epoch, int epochs,
                                           const std::string& where);

/// The first problem of a schedule's clock fields for `type`, as "FIELD: why"
/// relative to the schedule (e.g. "decay_clocks: must be ≥ 1 with decay
/// COSINE"), or "" when there is none: clocks ≥ 0; final_factor in [0, 1];
/// a decay needs decay_clocks ≥ 1; a schedule needs ADAM, ADAGRAD or SGD
/// (FTRL's step divides by its rate; SUM and NOOP have none); the epoch
/// fields must have been resolved.
std::string ScheduleProblem(const LearningRateSchedule& schedule, OptimizerType type);

}  // namespace tether
