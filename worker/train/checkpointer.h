// Checkpointer: one worker's part in the job's coordinated checkpoints
// (config.checkpoint; docs/OPERATIONS.md). A checkpoint is a consistent cut
// at a clock: each worker writes its own state (WorkerState: its place in
// the data, counters, the model's own state; with 16-bit pushes its
// error-feedback residuals, checkpoint/residual_file.h) into the checkpoint's folder,
// then every shard writes its rows once every worker still training is at
// that clock, and the lowest rank in the cut (worker 0 while it trains)
// writes the MANIFEST last, which makes the checkpoint exist. At the end of
// the job the evaluator alone takes the final checkpoint, after the
// barrier.
//
// When to checkpoint is decided elsewhere (StopControl, the clock);
// this class writes, asks and records. Before each checkpoint it checks
// that the data files are unchanged since they were read, and the MANIFEST
// records their stamps (worker/train/data_watch.h). Ownership: borrows the
// client, the session, the data watch and the config (they outlive it). Thread-safety: not thread-safe; the
// training thread owns it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "proto/config.pb.h"
#include "proto/tables.pb.h"
#include "worker/client/client.h"
#include "worker/client/job_session.h"
#include "worker/train/data_watch.h"

namespace tether {

struct TrainReport;  // worker/trainer.h

class Checkpointer {
 public:
  /// `num_servers`: shards of the job; `tables`: the job's (the manifest
  /// records both). `session` takes part in the rounds at `client`'s clock;
  /// `data` holds the stamps of the data files read (checked before each
  /// checkpoint, recorded in its MANIFEST). `input_refused` (may be null,
  /// borrowed): set to true when a data file changed since it was read
  /// (bad input: the worker exits kExitBadInput, never restarted).
  Checkpointer(const JobConfig& config, int rank, int num_servers, std::vector<TableSpec> tables,
               WorkerClient* client, JobSession* session, const DataWatch* data, bool* input_refused = nullptr);

  /// checkpoint.dir is set.
  bool enabled() const { return !config_.checkpoint().dir().empty(); }

  /// Takes the checkpoint at the client's clock with this worker's `state`
  /// (rank, number of workers and clock are set here): writes the
  /// residual file (when the client keeps residuals) and the state file
  /// that records it, waits for every shard's files (the cut), and writes the MANIFEST
  /// when this worker is the writer (ManifestWriterRank), pruning to
  /// checkpoint.keep_last. Returns false when shard 0 abandoned the round
  /// (a worker restarted at or past its clock: no MANIFEST; logged, and
  /// training goes on). Records the pause, the count and the folder in
  /// `report`. Errors: FailedPrecondition naming a data file changed since
  /// it was read (nothing written); the state's write, the shards' (naming
  /// the file), the client's waits.
  StatusOr<bool> Take(WorkerState state, TrainReport* report);

  /// The end-of-job checkpoint, taken by the evaluator alone after the
  /// barrier, at the clock the barrier fixed. A job resumed from this
  /// clock's final checkpoint in checkpoint.dir keeps it (`resumed`,
  /// `resume_dir`: the checkpoint resumed, or empty). Workers that left
  /// before the end make it a plain checkpoint (their places kept, LEFT)
  /// unless `dealt_by_shard0` (data on demand: their chunks were dealt
  /// again). Returns "" when the job finished, else why not (the run then
  /// fails). Errors: as Take.
  StatusOr<std::string> TakeFinal(const CheckpointManifest& resumed, const std::string& resume_dir,
                                  bool dealt_by_shard0, TrainReport* report);

 private:
  // The data files unchanged since they were read (`when`: "before the
  // checkpoint at clock 40"), or an error naming each change.
  Status CheckData(const std::string& when) const;
  // The MANIFEST of the checkpoint in `dir` at `clock` from the shards'
  // reply, written last; copies the state files of workers that left.
  Status WriteManifest(const std::string& dir, int64_t clock, bool final, const CheckpointReply& reply);

  const JobConfig& config_;
  int rank_;
  int num_servers_;
  std::vector<TableSpec> tables_;
  WorkerClient* client_;
  JobSession* session_;
  const DataWatch* data_;
  bool* input_refused_;  // may be null
  std::string who_;
};

}  // namespace tether
