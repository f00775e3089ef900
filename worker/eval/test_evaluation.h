// TestEvaluation: the evaluation rounds of one training run on the test set
// (partitioned evaluation, worker/eval/partitioned_eval.h). Every initial worker
// holds its part of the test set; round 0 at the start gathers what no
// worker holds alone (PSP@k's label counts, the test offsets); after every
// train.eval_every_epochs epochs each worker evaluates its part and rank 0
// merges the parts once all are in (a round still open is merged at a
// later epoch's end or at the end, so the metrics log stays in epoch
// order); at the end every worker evaluates its part of the trained model
// and the evaluator (rank 0, or the lowest rank at the barrier when it
// left) merges them into the report.
//
// Figures: merged in rank order (Evaluator::Merge), so they do not depend
// on which worker finished first. Evaluation time is the caller's to keep
// out of the training time.
//
// Ownership: owns the test set; borrows the model, backend, client, session
// and metrics log (may be null), which outlive it. Thread-safety: not
// thread-safe; the training thread owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <utility>
#include <string>
#include <vector>

#include "telemetry/metrics_log.h"
#include "core/status.h"
#include "proto/config.pb.h"
#include "proto/wire.pb.h"
#include "compute/backend.h"
#include "input/reader.h"
#include "worker/client/client.h"
#include "worker/client/job_session.h"
#include "worker/models/model.h"
#include "worker/eval/partitioned_eval.h"

namespace tether {

struct TrainReport;  // worker/trainer.h

/// Merges every worker's partial (`all`, rank order) into `report`'s
/// test_metrics, eval_counts, test_rows, eval_workers and
/// eval_seconds_slowest (warning when some worker's part is missing or rows
/// tie at the top). Errors: FailedPrecondition when no test row was
/// covered because every initial worker left; Evaluator::Merge's.
Status MergeEvalResults(const JobConfig& config, const std::vector<EvalPartial>& all, Model* model, Backend* backend,
                        const std::vector<double>& inv_propensity, TrainReport* report);

class TestEvaluation {
 public:
  /// `test`: this worker's part of the test set (empty for a worker that
  /// joined beyond the initial ranks).
  /// The model reads through `client`; the parts travel by `session`.
  TestEvaluation(const JobConfig& config, int rank, Dataset test, Model* model, Backend* backend,
                 WorkerClient* client, JobSession* session);

  /// Where the rounds' results are logged ("kind": "eval"); may be null.
  void set_metrics_log(MetricsLog* log) { metrics_log_ = log; }
  /// This worker's part of the test set, read at the end (a run with a
  /// validation split reads the test split only for the final evaluation,
  /// and sent no test rows in round 0: train.eval_max_rows is refused
  /// there, so no offset is needed), as LoadSplit read it; finished with
  /// round 0's IDF (FinishFeatures, data.tf_idf). Errors: FinishFeatures'.
  Status SetTest(Dataset test);
  /// Reads initial rank `rank`'s part of the test set as LoadSplit does
  /// (it is finished here like every part: FinishFeatures). With it, the
  /// evaluator scores the parts of workers that left the job before the
  /// final evaluation itself, so the final metrics cover the whole test set
  /// (FillMissingParts); without it they cover the parts sent.
  using PartLoader = std::function<StatusOr<Dataset>(int rank)>;
  void set_part_loader(PartLoader loader) { load_part_ = std::move(loader); }

  /// Round 0: sends this worker's training counts (CountTrainingRows) and
  /// test rows, and waits for every initial worker's. A joiner sends none
  /// and takes the others'. With data.tf_idf, then weighs this worker's test
  /// rows (given to the constructor as LoadSplit read them) by the IDF found
  /// (FinishFeatures). Errors: the client's, EvalSetupFrom's,
  /// FinishFeatures'.
  Status Setup(const TrainingCounts& counts);
  int64_t test_rows() const { return test_.features.rows; }
  /// data.tf_idf: the IDF of round 0 (after Setup); empty otherwise.
  const std::vector<float>& feature_idf() const { return setup_.feature_idf; }

  /// After epoch `epoch` (1-based) when train.eval_every_epochs says so and
  /// it is not the last (a joiner never evaluates): evaluates this worker's
  /// part; rank 0 logs the rounds complete so far, with its figures at the
  /// time (`train_s`, `samples`, `loss`). Errors: the client's, the model's.
  Status AfterEpoch(int epoch, double train_s, uint64_t samples, double loss);
  /// Whether AfterEpoch evaluates after epoch `epoch` (1-based).
  bool DueAfter(int epoch) const;

  /// The end, on a worker that does not report: its part of the trained
  /// model, for the evaluator (none for a joiner).
  Status SendFinalPart();
  /// The end, on the evaluator: the rounds still open, then the final
  /// round merged into `report` (test metrics, counts, eval time), logged.
  /// Errors: the client's; Internal when shard 0 answered before every
  /// part was in.
  Status Final(TrainReport* report);

 private:
  // A mid-training round of rank 0 not yet logged: its figures at the time,
  // and its merge once every part is in.
  struct PendingRound {
    int epoch = 0;
    double train_s = 0;
    uint64_t samples = 0;
    double loss = 0;
    bool merged = false;  // metrics and test_rows are in
    std::vector<std::pair<std::string, double>> metrics;
    int64_t test_rows = 0;
  };
  // Evaluates this worker's part for `round` and sends it; `want` as
  // EvalGather's. Returns whether every part was merged into *report.
  StatusOr<bool> Evaluate(int64_t round, EvalGatherBody::EvalWant want, TrainReport* report);
  // Scores `part` (rank `rank`'s, starting at `offset` in the whole test
  // set) on the model as the servers hold it now.
  StatusOr<EvalPartial> ScorePart(int rank, const Dataset& part, int64_t offset);
  // The final round on the evaluator: scores the part of every initial
  // rank missing from `all` (rank order kept), when a PartLoader is set.
  // Returns how many it scored; a part it cannot read is left out (with a
  // warning) and the evaluation stays partial.
  StatusOr<int> FillMissingParts(std::vector<EvalPartial>* all);
  // Logs the open rounds in order (EVAL_POLL: as far as they are complete;
  // EVAL_WAIT: all, waiting for each).
  Status CollectPending(EvalGatherBody::EvalWant want);
  void Log(const std::vector<std::pair<std::string, double>>& metrics, int64_t test_rows, int epoch, double train_s,
           bool log_line, uint64_t samples, double loss);

  const JobConfig& config_;
  int rank_;
  bool joiner_;
  std::string who_;
  Dataset test_;
  Model* model_;
  Backend* backend_;
  WorkerClient* client_;
  JobSession* session_;
  MetricsLog* metrics_log_ = nullptr;
  EvalSetup setup_;
  std::deque<PendingRound> pending_;
  PartLoader load_part_;
};

}  // namespace tether
