// TrainingRun: one worker's run of the job (RunWorker, worker/trainer.h),
// in phases:
//
//   Prepare      the model's and memory checks, the compute backend, the
//                training data (TrainingData) and test part, the model —
//                all before any server is contacted
//   Resume       --resume_from: the checkpoint and where this rank starts
//                (worker/train/resume_plan.h)
//   Connect      the client (HELLO), AVERAGE's replica, round 0 of the
//                evaluation (worker/eval/test_evaluation.h)
//   StartTraining  the row source chosen once (worker/train/row_source.h:
//                static split, streamed share, data on demand), where
//                training starts (a resume, a restart in a running job)
//   Train        epochs of blocks of minibatches: pull, compute, push,
//                clock; checkpoints (worker/train/checkpointer.h) and
//                stops (worker/train/stop_control.h) between minibatches
//   Finish       barrier, the best epoch's model put back (a validation
//                split), final checkpoint, evaluation, the report and
//                the metrics file (worker/train/job_outcome.h says whether
//                the job did its job)
//
// A stop request ends Train early with a report marked left_early (the
// worker said goodbye). Any error ends the run; RunWorker then uses the
// connection (TakeClient, TakeSession) to leave or to tell the servers the
// job failed.
//
// Ownership: borrows the config and options (they outlive the run); owns
// the backend, model, data, client, session and the rooms above. Thread-safety: not
// thread-safe; one run per worker thread (several runs may share a process,
// tools/local_job.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "telemetry/metrics_log.h"
#include "core/status.h"
#include "checkpoint/dir_lock.h"
#include "checkpoint/residual_file.h"
#include "proto/checkpoint.pb.h"
#include "proto/config.pb.h"
#include "proto/tables.pb.h"
#include "compute/backend.h"
#include "worker/client/client.h"
#include "worker/client/job_session.h"
#include "worker/eval/test_evaluation.h"
#include "worker/eval/validation_evaluation.h"
#include "worker/models/model.h"
#include "worker/train/pacing.h"
#include "worker/train/checkpointer.h"
#include "worker/train/data_watch.h"
#include "worker/train/resume_plan.h"
#include "worker/train/row_source.h"
#include "worker/train/stop_control.h"
#include "worker/train/training_data.h"
#include "worker/trainer.h"

namespace tether {

/// How long a leaving worker waits for its goodbyes (BYE_REPLY), or for its
/// ABORT to be flushed: a stop request is honoured within about a second
/// even when a shard is stalled or gone.
constexpr int kLeaveTimeoutMs = 1000;

class TrainingRun {
 public:
  /// `config` must have passed ValidateJobConfig.
  TrainingRun(const JobConfig& config, const TrainerOptions& options);
  ~TrainingRun();
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  /// Runs every phase (once). Errors: RunWorker's (worker/trainer.h).
  StatusOr<TrainReport> Run();

  /// The connection once made (null before): after a failed Run, RunWorker
  /// leaves or aborts with them. The session must go before the client; the
  /// run must not be used afterwards.
  std::unique_ptr<WorkerClient> TakeClient() { return std::move(client_); }
  std::unique_ptr<JobSession> TakeSession() { return std::move(session_); }

 private:
  using SteadyClock = std::chrono::steady_clock;

  // ---- Phases (training_run.cc).
  Status Prepare();
  Status CheckBeforeStart();
  // Worker 0 (the job's checkpoint writer) takes the folders' locks
  // (checkpoint/dir_lock.h): checkpoint.dir to write, the folder it resumes
  // from, when another, to read; held until Run returns.
  Status LockCheckpointFolders();
  Status LoadData();
  // The validation rows out of the training partition (a validation
  // split), and the early-stopping metric checked.
  Status CarveValidation();
  // The data files stamped again and compared with their stamps from
  // LoadData (`when`: "at the end of epoch 3"); an error names each change.
  Status CheckDataUnchanged(const std::string& when) const;
  // --resume_from: the checkpoint's data-file stamps against this run's.
  Status CheckResumeData() const;
  // --resume_from: the checkpoint's epochs against train.epochs
  // (ResumeEpochsDiff; an in-process job, or a checkpoint changed since
  // the start-up check). A state that cannot be read is left to the resume.
  Status CheckResumeEpochs() const;
  // `read` (an error reading the job's data files) returned as it is;
  // bad input (IsBadInput) is noted in options.input_refused for the
  // worker's exit code.
  Status NoteInput(Status read) const;
  // This worker's part of the test set (at the start; with a validation
  // split, at the end).
  StatusOr<Dataset> LoadTestPart() const;
  // Initial rank `rank`'s part of the test set (the evaluator reads the
  // parts of workers that left).
  StatusOr<Dataset> LoadTestPartOf(int rank) const;
  Status Resume();
  // The residual file of this rank's state, read and checked against the
  // tables before anything connects (kept in resume_residuals_).
  Status ReadResumeResiduals();
  // Puts them into the new client's push encoder; logs what it restored.
  void RestoreResiduals();
  Status Connect();
  // data.tf_idf: round 0's IDF into feature_idf_, and the training and
  // validation rows held weighted by it (then normalised).
  Status WeighInput();
  ClientOptions MakeClientOptions() const;
  Status StartTraining();
  Status PlanStart();
  // A process restarted in the running job continues its predecessor's
  // share (RejoinPosition), or says why it starts again.
  void ApplyRejoin(bool streamed);
  void LogPipelining() const;

  // ---- Training (training_loop.cc).
  Status Train();
  Status TrainEpoch(int epoch);
  // One minibatch of block x / y; *loss its loss.
  Status TrainMinibatch(const Minibatch& batch, float* loss);
  // The clock ends after `batch`: CLOCK, logs, a checkpoint if due.
  Status EndClock(int epoch, const Minibatch& batch, float loss);
  Status EndEpoch(int epoch, uint64_t samples_from);
  void NoteDivergence(int epoch);
  // ", ETA 4m 10s" for the epoch line after `done_epochs` epochs in
  // `elapsed_s` when epochs take a few seconds or more and some are left;
  // "" otherwise.
  std::string EtaNote(double elapsed_s, int done_epochs) const;
  // A stop noticed now (logs the first time); true while one is pending.
  bool NoticeStop();
  // Takes the checkpoint at the client's clock if due, at `next_row` of
  // `epoch` with the epoch's loss so far; *leave: it was the stop's (leave
  // now).
  Status CheckpointIfDue(int epoch, int64_t next_row, double loss_sum, int64_t loss_batches, bool* leave);
  // What a checkpoint at `next_row` of `epoch` records of this worker.
  WorkerState StateAt(int epoch, int64_t next_row, double loss_sum, int64_t loss_batches) const;
  // The resumed checkpoint's validation history into validation_.
  Status RestoreValidationHistory();
  // The feed's empty clock while waiting for a chunk (data on demand).
  Status EmptyClock();
  RowSourceHooks SourceHooks();
  // Leaves the job early (a stop): flushes the metrics log, says BYE
  // (bounded), marks the report.
  void Leave();
  void LeaveStoppedFeed();
  double TrainSeconds() const;
  // Seconds so far not spent training: waits for a chunk, evaluations
  // (the adaptive batch report's idle_s, as differences).
  double IdleSeconds() const;
  void PublishProgress(int epoch_1based);

  // ---- The end (training_finish.cc).
  Status Finish();
  Status Barrier();
  // The best epoch's model put back on the shards (train.keep_best_model),
  // before the final checkpoint and evaluation; sets the scored epoch.
  Status RestoreBestModel();
  // The epoch whose model the test split scores: the best epoch's when it is
  // kept, else the last trained; a resume with nothing left to train, the
  // finished run's.
  int ScoredEpoch() const;
  // Resumed with nothing left to train from a run with a validation split:
  // no epoch evaluated here, so the finished run's outcome is reported.
  bool ReportsRecordedValidation() const;
  WorkerStats BarrierStats() const;
  Status Evaluate(std::string* incomplete);
  Status Report(const std::string& incomplete);

  const JobConfig& config_;
  const TrainerOptions& options_;
  const int rank_;
  const int num_workers_;
  const bool joiner_;  // a rank beyond the initial ones (elastic membership)
  const std::string who_;
  TrainReport report_;
  bool left_ = false;  // a stop ended the run early

  // Prepare.
  uint64_t cache_capacity_ = 0;
  std::unique_ptr<Backend> backend_;
  std::vector<TableSpec> tables_;
  DataWatch data_watch_;  // the data files, stamped before they are read
  TrainingData data_;  // moved into source_ by StartTraining
  int64_t partition_rows_ = 0;  // rows held in memory (the checkpoint's partition_rows)
  Dataset test_;       // moved into eval_ by Connect
  // A validation split: the test split is read only at the end.
  bool test_deferred_ = false;
  Dataset validation_rows_;  // moved into validation_ by Connect
  // data.tf_idf: the IDF of every worker's training rows (round 0), set by
  // Connect; the rows held, dealt and evaluated are weighted by it.
  std::vector<float> feature_idf_;
  std::unique_ptr<Model> model_;

  std::vector<CheckpointDirLock> folder_locks_;

  // Resume.
  std::string resume_dir_;
  CheckpointManifest manifest_;
  WorkerState resume_;  // this rank's state, or the rows dealt to it
  std::vector<ResidualTable> resume_residuals_;  // its residual file's, restored at Connect
  bool resume_finished_ = false;  // nothing left to train: straight to the barrier

  // Connect. The stop control is shared with the client's stop callback.
  std::shared_ptr<StopControl> stop_;
  std::unique_ptr<WorkerClient> client_;
  std::unique_ptr<JobSession> session_;  // the control calls, over client_
  std::unique_ptr<TestEvaluation> eval_;
  std::unique_ptr<ValidationEvaluation> validation_;  // null without a validation split
  std::unique_ptr<Checkpointer> checkpointer_;

  // Observability (train.metrics_dir, progress_every_s, on_progress).
  std::unique_ptr<MetricsLog> metrics_log_;
  std::optional<ProgressTimer> progress_;
  WorkerProgress progress_now_;

  // Training.
  std::unique_ptr<RowSource> source_;
  StartPoint start_;
  AdaptiveBatchConfig adaptive_;
  int64_t bs_ = 0;  // train.minibatch_size, or shard 0's last answer (adaptive)
  int64_t bs_min_ = 0, bs_max_ = 0;
  int per_clock_ = 1;
  int log_every_ = 1;
  int64_t minibatches_ = 0;       // all runs'
  uint64_t run_minibatches_ = 0;  // this run's (WorkerStats.minibatches)
  int64_t clock_rows_ = 0;        // rows of the clock in progress
  double clock_loss_ = 0;
  int clock_batches_ = 0;
  double pull_wait_ = 0;     // seconds in the model's Pull
  double eval_seconds_ = 0;  // evaluations during training, left out of train_s
  double idle_reported_s_ = 0;     // IdleSeconds() at the last adaptive batch report
  SteadyClock::time_point train_start_;
  double train_start_unix_s_ = 0;
  double first_loss_ = 0;    // divergence's reference (the first minibatch's)
  double uniform_loss_ = 0;  // log(outputs): a uniform softmax's
  double slowdown_ = 1.0;
  SlowdownIdler slow_idle_{1.0};
  std::vector<int64_t> epoch_rows_;  // rows trained per epoch
  int feed_epoch_ = 0;  // the epoch in progress (a checkpoint while waiting for a chunk)
  // The epoch in progress: its loss so far.
  double loss_sum_ = 0;
  int64_t loss_batches_ = 0;
};

}  // namespace tether
