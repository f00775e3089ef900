#include "worker/trainer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <glog/logging.h>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/file_util.h"
#include "worker/metrics_json.h"
#include "worker/models/model_registry.h"
#include "worker/train/job_outcome.h"
#include "worker/eval/validation_evaluation.h"
#include "worker/train/training_run.h"

namespace tether {

bool RowsDealtOnDemand(const JobConfig& config) {
  // The static split (data.train_split by rank over cluster.num_workers)
  // has no share for a rank beyond the initial ones; shard 0's chunks
  // (worker/train/chunk_feed.h) go to whichever rank asks.
  return config.train().data_on_demand();
}

int AveragePeriodMinibatches(const JobConfig& config) {
  const int64_t bs = std::max<int64_t>(1, config.train().minibatch_size());
  const int64_t rows = std::max<int64_t>(1, config.consistency().period_rows());
  return static_cast<int>(std::min<int64_t>((rows + bs - 1) / bs, std::numeric_limits<int>::max()));
}

bool LossDiverged(double loss, double reference, double factor) {
  return !std::isfinite(loss) || loss > factor * reference;
}

double TrainReport::Metric(const std::string& name) const {
  for (const auto& [k, v] : test_metrics)
    if (k == name) return v;
  return std::numeric_limits<double>::quiet_NaN();
}

namespace {

// Says goodbye after a stop (bounded), and returns the report of a worker
// that left early.
TrainReport LeaveStopped(JobSession* session, const std::string& who, int stopped_by_shard) {
  if (Status st = session->Leave(kLeaveTimeoutMs); !st.ok())
    LOG(WARNING) << who << "goodbye incomplete: " << st.message();
  TrainReport report;
  report.left_early = true;
  report.stopped_by_shard = stopped_by_shard;
  return report;
}

}  // namespace

StatusOr<TrainReport> RunWorker(const JobConfig& config, const TrainerOptions& options) {
  // The run (its model, data and rows) is gone before the client leaves or
  // aborts: pull replies still arriving are dropped, never written
  // (JobSession::Leave).
  std::unique_ptr<WorkerClient> client;
  std::unique_ptr<JobSession> session;  // over `client`: goes first
  StatusOr<TrainReport> result = Status::Internal("not run");
  {
    TrainingRun run(config, options);
    result = run.Run();
    client = run.TakeClient();
    session = run.TakeSession();
  }
  if (result.ok() || client == nullptr) return result;
  const std::string who = "[worker " + std::to_string(options.rank) + "] ";
  const std::string& why = result.status().message();
  const std::string& ckpt_dir = config.checkpoint().dir();
  const bool stop_requested = options.stop_requested && options.stop_requested();
  switch (OnRunFailure(stop_requested, client->stopping_shard(), session->bye_sent(), client->removed())) {
    case FailureAction::kLeaveStopped:
      // The stop request cut a wait short (or the wait failed meanwhile):
      // the worker leaves as it would between minibatches. With checkpoints
      // on, a wait gives up on a stop only before training starts or after
      // kStopCheckpointGraceS: no stop checkpoint then.
      LOG(WARNING) << who << "stop requested at clock " << client->clock() << " while waiting"
                   << (CutShortByStop(why) ? "" : " (the wait ended with: " + why + ")") << ": leaving the job"
                   << (ckpt_dir.empty() ? std::string()
                                        : " without a stop checkpoint (a resume starts from the latest complete one in " +
                                              ckpt_dir + ")");
      return LeaveStopped(session.get(), who, -1);
    case FailureAction::kLeaveShardStopped:
      // A server told to stop went (no checkpoint.dir: at once) before this
      // worker could leave between minibatches.
      LOG(WARNING) << who << "server shard " << client->stopping_shard() << " was told to stop and is gone ("
                   << (why.rfind(who, 0) == 0 ? why.substr(who.size()) : why)
                   << "): leaving the job without a checkpoint"
                   << (ckpt_dir.empty() ? " (no checkpoint dir: a rerun starts from the beginning)"
                                        : " (a resume starts from the latest complete one in " + ckpt_dir + ")");
      return LeaveStopped(session.get(), who, client->stopping_shard());
    case FailureAction::kReturn:
      // The goodbye's answer failed (the shards ended the job as failed
      // after this worker finished, or one is gone), or the servers removed
      // this worker (silent past cluster.worker_timeout_ms) and went on
      // without it: with data on demand its chunks were dealt again and the
      // job can still finish; with the static split the servers end the job
      // as failed themselves. They know: an ABORT would only end it early.
      if (!session->bye_sent())
        LOG(ERROR) << who << "removed from the job by the servers; leaving without aborting it";
      return result;
    case FailureAction::kAbort:
      break;
  }
  // A job that failed tells its servers so, or they would wait for this
  // worker until cluster.worker_timeout_ms and then end as if all went well.
  session->Abort("worker " + std::to_string(options.rank) + " failed: " +
                    (why.rfind(who, 0) == 0 ? why.substr(who.size()) : why),
                kLeaveTimeoutMs);
  return result;
}

ClientOptions ClientOptionsFor(const JobConfig& config, int rank, std::vector<std::string> servers) {
  ClientOptions o;
  o.rank = rank;
  o.servers = std::move(servers);
  o.staleness = EffectiveStaleness(config.consistency());
  o.data_on_demand = config.train().data_on_demand();
  o.epochs = config.train().epochs();
  o.num_workers = config.cluster().num_workers();
  o.checkpoint_dir = config.checkpoint().dir();
  o.keep_best_model = KeepsBestModel(config);
  o.consistency_model = config.consistency().model();
  o.job_id = JobId(config);
  o.generation = config.cluster().generation();
  o.tables = TablesForJob(config);
  o.heartbeat_interval_ms = config.cluster().heartbeat_interval_ms();
  o.request_timeout_ms = config.cluster().request_timeout_ms();
  o.liveness_timeout_ms = config.cluster().liveness_timeout_ms();
  o.first_connect_timeout_ms = config.cluster().startup_timeout_ms();
  o.send_hwm = config.cluster().send_hwm();
  o.recv_hwm = config.cluster().recv_hwm();
  // A fraction of the model needs the tables' sizes: RunWorker resolves it
  // (ResolveCacheCapacity) and sets the capacity in bytes.
  o.cache_capacity_bytes = config.consistency().cache_capacity_bytes();
  o.key_lists = config.consistency().key_list_cache();
  for (const TableSpec& t : o.tables) {
    bool feedback = config.train().error_feedback();
    for (const auto& tc : config.table())
      if (tc.name() == t.name() && tc.has_error_feedback()) feedback = tc.error_feedback();
    o.error_feedback.push_back(feedback);
  }
  return o;
}

RunVerdict JudgeReport(const TrainReport& report, const JobConfig& config) {
  FinishedRun run;
  run.diverged = report.diverged;
  run.diverged_at_epoch = report.diverged_at_epoch;
  run.evaluated = !report.test_metrics.empty();
  run.eval_workers = report.eval_workers;
  run.num_workers = config.cluster().num_workers();
  run.test_rows = report.test_rows;
  run.fail_on_divergence = config.train().fail_on_divergence();
  run.accept_partial_eval = config.train().accept_partial_eval();
  return JudgeFinishedRun(run);
}

Status WriteMetricsJson(const TrainReport& r, const JobConfig& config, const std::string& path) {
  const nlohmann::json j = MetricsJson(r, config);
  // --metrics_out=/dev/null or a pipe is written through (core/output_target.h).
  return WriteFileAtomically(path, j.dump(2) + "\n", StreamOutput::kWriteThrough);
}

}  // namespace tether
