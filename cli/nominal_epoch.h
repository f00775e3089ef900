// The job's nominal epoch in clocks, for settings given in epochs that the
// servers read in clocks (a learning-rate schedule's warm-up and decay,
// LearningRateSchedule in proto/tables.proto). Every worker and the
// launcher resolve the same config to the same clocks: the count uses the
// job-wide number of training rows, never a worker's own share.
//
// Pure functions of the config and the files it names; thread-compatible.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "proto/config.pb.h"

namespace tether {

/// The rows the job trains on per epoch: the training split's (the split
/// file's row count; else the XMC header's, the IDX file's items or the
/// LIBSVM / ARFF file's rows), less the validation rows (those of
/// data.validation_split that data.train_split lists, or without a
/// train_split all of them; or the expected share of
/// train.validation_fraction, rounded).
/// Errors: the readers' (NotFound, InvalidArgument naming file:line);
/// InvalidArgument when the training data is a file list or streamed (no
/// row count before reading: give the schedule in clocks).
StatusOr<int64_t> NominalTrainingRows(const JobConfig& config);

/// Clocks in a nominal epoch of `rows` rows: each worker's share
/// ceil(rows / num_workers) in minibatches of minibatch_size, in clocks of
/// minibatches_per_clock, rounded up; at least 1.
int64_t NominalClocksPerEpoch(const JobConfig& config, int64_t rows);

/// Resolves the epoch fields of every learning-rate schedule in the config
/// (optimizer.schedule and each table's) into clocks (ResolveScheduleEpochs,
/// core/schedule_config.h), counting the rows only when a schedule gives
/// epochs or a decay without decay_clocks (`decay: COSINE` alone decays over
/// every clock of train.epochs the warm-up leaves). Errors: NominalTrainingRows' and ResolveScheduleEpochs'.
Status ResolveScheduleClocks(JobConfig* config);

}  // namespace tether
