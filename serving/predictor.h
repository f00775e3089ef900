// Scoring new rows with a trained model (tether-predict): the forward pass
// of the model's compute class (XmcMlp, SparseLr, DenseMlp: worker/) on a
// compute backend (compute/backend.h), fed from a TrainedModel's tables
// instead of the parameter server. A row absent from a row table (a feature
// or label never trained) takes its initializer's value, as the server
// would have created it (InitialWeight, core/table_spec.h).
//
// Work is split into blocks of rows dealt to `threads` threads, each with
// its own backend and compute object. Metrics are added to one Evaluator
// (worker/eval/evaluator.h, the one training's evaluation uses) block by block
// in row order, so they are the same sums, bit for bit, whatever the number
// of threads.
//
// Thread-safety: PredictRows is safe to call from several threads at once
// (it shares nothing between calls). Ownership: borrows its inputs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/model_file.h"
#include "core/status.h"
#include "checkpoint/trained_model.h"
#include "input/reader.h"

namespace tether {

struct PredictOptions {
  int threads = 1;            // compute threads, each with its own backend
  std::string device = "cpu";  // cpu | cuda | auto (CreateBackend)
  int top_k = 5;              // labels kept per row (multi-label, multiclass); ≥ 1
  /// Rows per block; 0: train.eval_minibatch_size of the model's config,
  /// lowered so a block's scores stay within 256 MiB.
  int64_t block_rows = 0;
  /// Propensity model of PSP@k (InversePropensity, eval/metrics.h), used
  /// when the model file carries label counts.
  double psp_a = 0.55, psp_b = 1.5;
};

struct Predictions {
  int64_t rows = 0;
  int k = 0;                      // entries per row: min(top_k, outputs); 1 for a binary model
  std::vector<uint32_t> labels;   // rows × k output indices (0-based), best first; binary: 0
  std::vector<float> scores;      // rows × k scores (logits) of those outputs
  /// The Evaluator's metrics when some row carries a label, else empty.
  std::vector<std::pair<std::string, double>> metrics;
  int64_t tied_rows = 0;
  int64_t outputs = 0;            // score columns of the model
};

/// Scores every row of `data` (features as LoadSplit reads them for the
/// model's config: scaled, normalised) with `model`. Errors:
/// InvalidArgument for a model type it cannot score, a missing or
/// mis-shaped table (naming it), or options out of range; the backend's
/// (e.g. Unavailable for --device=cuda without a GPU).
StatusOr<Predictions> PredictRows(const TrainedModel& model, const LabelCounts& counts, const Dataset& data,
                                  const PredictOptions& options);

/// PredictRows with an ensemble of `models` (MakeEnsembleScorerSet,
/// serving/scorer.h: the mean of their probabilities, as log probabilities
/// or logits); the settings (block size, label numbering) of models[0]; the
/// propensities from `counts`. Each thread makes one backend per model.
/// Errors: PredictRows' for any model, and InvalidArgument when the models
/// disagree on what they score (naming the field).
StatusOr<Predictions> PredictEnsemble(const std::vector<const TrainedModel*>& models, const LabelCounts& counts,
                                      const Dataset& data, const PredictOptions& options);

/// The label id of output `index` in the data's own numbering: index +
/// data.index_base for multi-label models, + data.label_base for
/// multiclass; a binary model's one output is 1.
int64_t OutputLabelId(const JobConfig& config, uint32_t index);

}  // namespace tether
