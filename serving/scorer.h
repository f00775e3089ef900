// Per-thread scorers of a trained model (PredictRows, serving/predictor.h):
// the forward pass of the model's compute class (XmcMlp, SparseLr, DenseMlp:
// worker/) on one compute backend, fed from a TrainedModel's tables instead
// of the parameter server.
//
// Ownership: a ScorerSet borrows the TrainedModel (it must outlive the set
// and every scorer made from it) and owns what it gathers once for all
// threads (XMC's w2, biases). Each Scorer owns its backend and scratch.
// Thread-safety: ScorerSet::Make may be called from several threads at once;
// a Scorer is used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "checkpoint/trained_model.h"
#include "compute/backend.h"
#include "input/csr.h"

namespace tether {

/// One thread's scorer: its backend, its compute object and scratch.
class Scorer {
 public:
  virtual ~Scorer() = default;
  /// *scores = (end − begin) × outputs logits (row-major) of rows [begin,
  /// end) of x (rows × num_features CSR). Errors: the compute class's.
  virtual Status Score(const CsrMatrix& x, int64_t begin, int64_t end, std::vector<float>* scores) = 0;
};

/// A factory of per-thread scorers over one model's tables.
struct ScorerSet {
  int64_t outputs = 0;  // score columns of the model
  /// A scorer that computes on `backend` (taken over).
  std::function<std::unique_ptr<Scorer>(std::unique_ptr<Backend> backend)> make;
};

/// The name PredictRows knows the model by: model.name when set, else the
/// type's ("xmc_mlp", "sparse_lr", "dense_mlp").
std::string ModelKindName(const JobConfig& config);

/// The scorers of `model` (kind from ModelKindName). Errors: InvalidArgument
/// for a kind that cannot be scored ("model 'NAME' cannot be scored here"),
/// or a missing or mis-shaped table (naming it and the width needed).
StatusOr<ScorerSet> MakeScorerSet(const TrainedModel& model);

/// Whether `model`'s tables are the ones its own config declares
/// (TablesForJob; shapes, key counts and bases, optimizer type), for a
/// model whose kind tether-predict knows (others pass). The reader checks
/// each row table's keys against its spec's range (ReadModelFile,
/// checkpoint/model_file.h); this ties that range to the config
/// (data.num_features, data.num_labels, data.hashed_features).
/// Errors: InvalidArgument "the model's config and its tables disagree:
/// ...".
Status CheckModelTables(const TrainedModel& model);

/// What MakeScorerSet checks before it allocates anything, for a model whose
/// kind tether-predict knows: its tables are the ones its own config
/// declares (CheckModelTables), and what
/// scoring gathers beyond them (XMC's whole output layer) fits in the
/// memory the process may use. A model file is untrusted: a config that
/// claims 2e9 labels over a table of 159 keys is refused here.
/// Errors: InvalidArgument "the model's config and its tables disagree:
/// ...", ResourceExhausted "scoring needs ...".
Status CheckModelShape(const TrainedModel& model);

/// An ensemble's scorers (Dietterich, "Ensemble Methods in Machine
/// Learning", MCS 2000: models of different seeds averaged): each row's
/// scores are the mean of the models' probabilities, written back as
/// scores of the kind a single model gives, so ranking, top-k and the
/// evaluator take them as they are: log of the mean softmax probability
/// for SOFTMAX multi-label and multiclass models; logit of the mean sigmoid
/// probability for BCE multi-label and binary ones (both computed from log
/// probabilities, so no probability rounds to 0 or 1 on the way). A scorer
/// made from the set takes one backend and makes one more per further
/// model on `device` (each model's scorer owns its backend).
/// `models` are borrowed and must outlive the set. Errors: MakeScorerSet's
/// for each model, and InvalidArgument when the models disagree on what
/// they score (EnsembleMismatch), naming the field and both values.
StatusOr<ScorerSet> MakeEnsembleScorerSet(const std::vector<const TrainedModel*>& models, const std::string& device);

/// The first setting on which `other` would score rows differently from
/// `first` as a member of one ensemble (model kind, widths, loss, label
/// numbering, the input's scale, offset, row normalisation and TF-IDF), as
/// "FIELD: A vs B", or "" when they agree.
std::string EnsembleMismatch(const JobConfig& first, const JobConfig& other);

}  // namespace tether
