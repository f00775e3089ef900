// Partitioned evaluation: every worker evaluates its own part of the test
// set (partition `rank` of num_workers, as the reader splits the training
// file), sends its partial sums to shard 0 (EVAL_GATHER), and rank 0, the
// reporting worker, merges every worker's partial in rank order
// (worker/eval/evaluator.h Evaluator::Merge): integer counts exactly, the sums of
// doubles in one fixed order, so the figures do not depend on which worker
// finished first, and match one worker's evaluation of the whole set (hit
// counts exactly, nDCG@k to ~1e-15).
//
// Round 0 (kSetupEvalRound), at the job's start, gathers what no single
// worker holds: the training label counts over the whole training split
// (PSP@k's inverse propensities, Jain, Prabhu & Varma, KDD 2016), with
// data.tf_idf the training rows' document frequency of every feature (the
// IDF every worker weighs its input by, input/feature_weighting.h), and
// each worker's number of test rows (its offset in the test set, so
// train.eval_max_rows keeps the first N rows of the whole set). Counts are
// integers summed in rank order: every worker finds the same IDF, the one
// a single worker holding the whole training split would find.
//
// Thread-safety: functions of their arguments, apart from the session's
// calls (one thread, the worker's).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "proto/wire.pb.h"
#include "input/csr.h"
#include "worker/client/job_session.h"
#include "worker/eval/evaluator.h"
#include "worker/models/model.h"

namespace tether {

/// What round 0 gives a worker.
struct EvalSetup {
  /// Multi-label: w_l = 1/p_l from the label counts of every worker's
  /// training partition (InversePropensity, train.psp_a / psp_b); empty
  /// otherwise.
  std::vector<double> inv_propensity;
  /// data.tf_idf: idf(f) over the training rows of every worker
  /// (InverseDocumentFrequencies of the summed feature counts and
  /// train_rows), data.num_features of them; empty otherwise.
  std::vector<float> feature_idf;
  int64_t train_rows = 0;   // training rows over all workers
  int64_t test_offset = 0;  // index in the whole test set of this worker's first test row
  std::vector<int64_t> test_offsets;  // the same for every initial rank (test_offsets[rank] == test_offset)
  int64_t test_rows = 0;    // test rows over all workers
};

/// What a worker counted of its training rows for round 0
/// (CountTrainingRows, worker/train/training_data.h). A streamed partition
/// (data.streaming) is counted in a pass over its stream, never held whole.
struct TrainingCounts {
  std::vector<uint64_t> label_counts;    // multi-label: rows carrying label l; empty otherwise
  std::vector<uint64_t> feature_counts;  // data.tf_idf: rows holding feature f; empty otherwise
  int64_t rows = 0;                      // training rows counted
};

/// Round 0's partial of a worker: its training partition's rows and (multi-
/// label: `train_labels`, N × L CSR) rows per label, and its test rows.
EvalPartial SetupPartial(int rank, LabelKind kind, const CsrMatrix& train_labels, int64_t test_rows);
/// The same from counts already taken (label counts sent for multi-label
/// only; feature counts whenever given).
EvalPartial SetupPartial(int rank, LabelKind kind, const TrainingCounts& counts, int64_t test_rows);

/// Round 0's result for worker `rank` from every worker's SetupPartial in
/// rank order. Errors: InvalidArgument when a worker's partial is missing
/// (it left before round 0) or the label or feature counts differ in width
/// (naming the worker).
StatusOr<EvalSetup> EvalSetupFrom(const std::vector<EvalPartial>& all, int rank, int num_workers, LabelKind kind,
                                  double psp_a, double psp_b);

/// Sends this worker's SetupPartial and waits for every worker's (round 0),
/// then EvalSetupFrom. Errors: the session's, EvalSetupFrom's.
StatusOr<EvalSetup> ExchangeEvalSetup(int rank, int num_workers, LabelKind kind, double psp_a, double psp_b,
                                      const CsrMatrix& train_labels, int64_t test_rows, JobSession* session);
/// The same from counts already taken (the SetupPartial overload above).
StatusOr<EvalSetup> ExchangeEvalSetup(int rank, int num_workers, LabelKind kind, double psp_a, double psp_b,
                                      const TrainingCounts& counts, int64_t test_rows, JobSession* session);

/// Round 0 for a worker that joined the running job with a rank beyond the
/// `num_workers` initial ones (elastic membership): it holds no part of the
/// test set and sends no counts (they would change the sums the others
/// already took); it waits for the initial workers' partials and takes
/// EvalSetupFrom of them (its test offset is the whole set: it evaluates no
/// row). Errors: the session's, EvalSetupFrom's.
StatusOr<EvalSetup> JoinEvalSetup(int rank, int num_workers, LabelKind kind, double psp_a, double psp_b,
                                  JobSession* session);

/// This worker's test rows to evaluate: all `local_rows`, or with
/// max_rows > 0 those of its rows whose index in the whole set is below
/// max_rows (its rows start at `offset`).
int64_t RowsToEvaluate(int64_t offset, int64_t local_rows, int64_t max_rows);

/// Merges `all` (partials in rank order) into `into`, a fresh evaluator of
/// the job's label kind, outputs and propensities. Errors: Evaluator::Merge's.
Status MergeEvalPartials(const std::vector<EvalPartial>& all, Evaluator* into);

}  // namespace tether
