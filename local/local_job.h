// A whole job in one process: every server shard and every worker of the
// job runs as a thread of the calling process, and they talk over ZeroMQ
// `inproc://` endpoints in one shared context (`tether-worker --in_process`,
// `tether-launch --transport=inproc`).
//
// The protocol, the consistency model and the code are the multi-process
// ones (ServerShard, WorkerClient, RunWorker); only the transport differs:
// an inproc message moves between threads by pointer, so no byte is copied
// through the kernel and no ZeroMQ I/O thread runs. This is what Petuum
// Bösen does with the server threads it co-locates with its workers (Wei et
// al., SoCC 2015). It suits one host; jobs across hosts use tcp://.
//
// Cores: S shards + W workers are S + W busy threads; on a host with fewer
// cores they share them, which is still cheaper than the same number of
// processes talking over loopback TCP (docs/PERFORMANCE.md, training).
//
// Ownership: RunLocalJob owns the shards, workers and their ZeroMQ context
// for the call; it borrows the options (LocalJobOptions::model_out and
// stop stay the caller's). Thread-safety: RunLocalJob may run in any
// thread; LocalJobOptions::stop may be set from any thread.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "core/status.h"
#include "checkpoint/trained_model.h"
#include "proto/config.pb.h"
#include "worker/trainer.h"

namespace tether {

struct LocalJobOptions {
  std::string metrics_out;  // worker 0's metrics JSON (see WriteMetricsJson); "" = none
  /// Set (from any thread, e.g. a signal handler) to make every worker leave
  /// gracefully after its current minibatch. May be null.
  const std::atomic<bool>* stop = nullptr;
  /// Bound on how long the shards may take to exit after the last worker
  /// finished (they exit when every worker has said BYE).
  int shard_exit_timeout_ms = 60000;
  /// Every worker resumes from this checkpoint (TrainerOptions::resume_from).
  std::string resume_from;
  /// The run's input files, which no train.metrics_dir file may be
  /// (TrainerOptions::inputs; the shards' files too). Empty: none compared.
  std::vector<NamedInput> inputs;
  /// When set, and the job trained to its end, receives the trained model:
  /// every table's rows gathered from the shards once they have stopped
  /// (row tables: every row any shard created, sorted by key; dense tables:
  /// the shards' slices joined), with the job's config, id and generation
  /// (clock 0: an in-process job keeps no checkpoint clock). Not owned.
  TrainedModel* model_out = nullptr;
  /// Set to true when the worker whose failure ended the job failed on its
  /// data (TrainerOptions::input_refused). May be null. Not owned.
  bool* input_refused = nullptr;
};

/// Runs `config` (validated) with cluster.num_servers shards and
/// cluster.num_workers workers as threads; blocks until all are done.
/// Returns worker 0's report. Errors: the first worker failure in time
/// (named "worker R: ..."), else a shard's ("server S: ..."). When a worker
/// fails, the other workers' waits give up within a heartbeat interval
/// (ClientOptions::abort) and every shard stops, so nothing waits out a
/// request or worker timeout.
StatusOr<TrainReport> RunLocalJob(const JobConfig& config, const LocalJobOptions& options);

/// The inproc endpoint of shard `shard` of a one-process job.
std::string LocalShardEndpoint(int shard);

}  // namespace tether
