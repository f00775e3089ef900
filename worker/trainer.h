// The training loop of one worker (`tether-worker`): reads this worker's
// partition of the training rows, and for every minibatch pulls the rows of
// the features present in it (plus the output layer and hidden bias),
// computes gradients on the compute backend, pushes them, and advances its
// clock. At the end every worker meets at a barrier; rank 0 then evaluates
// P@1/3/5 and nDCG@1/3/5 on the test split.
//
// Thread-compatible: one trainer per process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "proto/tether.pb.h"

namespace tether {

struct TrainerOptions {
  int rank = 0;
  std::vector<std::string> servers;  // one endpoint per shard, in shard order
  std::string metrics_out;           // rank 0: JSON metrics written here (atomically) when non-empty
};

/// What a worker measured. Ranking metrics are filled on rank 0 only.
struct TrainReport {
  int64_t train_rows = 0;            // rows in this worker's partition
  uint64_t samples = 0;              // rows this worker trained on (all epochs)
  uint64_t total_samples = 0;        // over all workers (from the barrier)
  double train_seconds = 0;          // first pull to barrier release
  double samples_per_second = 0;     // total_samples / train_seconds
  double final_loss = 0;             // mean minibatch loss over the last epoch
  double precision_at[6] = {0, 0, 0, 0, 0, 0};  // index k = 1, 3, 5
  double ndcg_at[6] = {0, 0, 0, 0, 0, 0};
  int64_t test_rows = 0;
  double pull_wait_fraction = 0;     // share of train time blocked waiting for pulls
};

/// Runs one worker of the job end to end. `config` must have passed
/// ValidateJobConfig. Errors: data errors (file:line), pairing refusals,
/// timeouts naming the silent server, backend errors.
StatusOr<TrainReport> RunWorker(const JobConfig& config, const TrainerOptions& options);

/// Writes the report's metrics as JSON (keys precision_at_1, precision_at_3,
/// precision_at_5, ndcg_at_1, ndcg_at_3, ndcg_at_5, train_seconds,
/// samples_per_second, ...) to `path` via a temporary file and rename, so a
/// reader never sees half a file. Errors: IOError naming the path.
Status WriteMetricsJson(const TrainReport& report, const JobConfig& config, const std::string& path);

}  // namespace tether
