#include "worker/train/job_outcome.h"

#include <algorithm>

namespace tether {
namespace {

void AppendRank(int rank, std::string* list) { *list += (list->empty() ? "" : ", ") + std::to_string(rank); }

}  // namespace

bool IsBadInput(const Status& read) {
  return read.code() == Status::Code::kInvalidArgument || read.code() == Status::Code::kDataLoss;
}

std::string RanksLeftBeforeEnd(const std::vector<CheckpointWorker>& workers) {
  std::string left;
  for (const CheckpointWorker& w : workers)
    if (w.kind() == CheckpointWorker::LEFT || w.kind() == CheckpointWorker::GONE) AppendRank(w.rank(), &left);
  return left;
}

JobDivergence JudgeJobDivergence(const ShardStats* s0, int own_diverged_at_epoch) {
  JobDivergence d;
  const auto note = [&d](int epoch) {
    if (epoch <= 0) return;
    d.at_epoch = d.diverged ? std::min(d.at_epoch, epoch) : epoch;
    d.diverged = true;
  };
  note(own_diverged_at_epoch);
  if (s0 == nullptr) return d;
  for (const WorkerStats& w : s0->workers()) {
    if (!w.has_rank() || w.diverged_at_epoch() <= 0) continue;
    note(w.diverged_at_epoch());
    d.ranks.push_back(w.rank());
  }
  std::sort(d.ranks.begin(), d.ranks.end());
  return d;
}

bool FinalCheckpointIsFinal(const std::string& left_before_end, bool on_demand) {
  return left_before_end.empty() || on_demand;
}

bool ResumedFinalStays(const CheckpointManifest& resumed, int64_t clock, bool same_dir) {
  return resumed.final() && resumed.clock() == clock && same_dir;
}

BarrierVerdict JudgeBarrier(const ShardStats& s0, bool dealt_on_demand, bool fed, int epochs, int64_t train_rows,
                            bool checkpointing) {
  BarrierVerdict v;
  if (dealt_on_demand) return v;
  for (int r = 0; r < s0.workers_size(); ++r)
    if (!s0.workers(r).has_rank()) AppendRank(r, &v.missing);
  if (v.missing.empty()) return v;
  // Data on demand: their chunks were dealt again; shard 0 counted every
  // row of every epoch, so the job did finish.
  bool all_rows = fed && s0.chunk_epoch_rows_size() == epochs;
  for (int e = 0; all_rows && e < s0.chunk_epoch_rows_size(); ++e) all_rows = s0.chunk_epoch_rows(e) == train_rows;
  if (all_rows) {
    v.rows_redealt = true;
    return v;
  }
  v.incomplete = "the job did not finish: worker(s) " + v.missing +
                 " left before the end of training, so their rows were not all trained" +
                 (checkpointing ? "" : " (with checkpoint.dir set, a resume trains what they left)");
  return v;
}

FailureAction OnRunFailure(bool stop_requested, int stopping_shard, bool bye_sent, bool removed) {
  if (stop_requested) return FailureAction::kLeaveStopped;
  if (stopping_shard >= 0) return FailureAction::kLeaveShardStopped;
  if (bye_sent || removed) return FailureAction::kReturn;
  return FailureAction::kAbort;
}

bool CutShortByStop(const std::string& why) {
  // A request channel's wait, and a rendezvous lookup's.
  for (const std::string stop : {"stop requested", "stopped while waiting"})
    if (why.size() >= stop.size() && why.compare(why.size() - stop.size(), stop.size(), stop) == 0) return true;
  return false;
}

RunVerdict JudgeFinishedRun(const FinishedRun& run) {
  RunVerdict v;
  const bool partial = run.evaluated && run.eval_workers < run.num_workers;
  // Partial evaluation first: its P@k would be reported as the job's, the
  // more misleading of the two; a diverged loss is marked in the metrics.
  if (partial && !run.accept_partial_eval) {
    v.exit_code = kExitPartialEval;
    v.why = "the final evaluation covered only " + std::to_string(run.test_rows) + " test rows, the parts of " +
            std::to_string(run.eval_workers) + " of " + std::to_string(run.num_workers) +
            " workers (the others left): the metrics are not the whole test set's; exit " +
            std::to_string(kExitPartialEval) + " (accept such a run with --accept_partial_eval, "
            "train.accept_partial_eval: true)";
  } else if (partial) {
    v.accepted.push_back("partial_evaluation");
  }
  if (run.diverged && run.fail_on_divergence) {
    if (v.exit_code == 0) {
      v.exit_code = kExitDiverged;
      v.why = "training diverged at epoch " + std::to_string(run.diverged_at_epoch) + ": exit " +
              std::to_string(kExitDiverged) +
              " (accept a diverged run with --nofail_on_divergence, train.fail_on_divergence: false)";
    }
  } else if (run.diverged) {
    v.accepted.push_back("diverged");
  }
  return v;
}

}  // namespace tether
