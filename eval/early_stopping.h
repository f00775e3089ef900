// Early stopping on a validation metric (Prechelt, "Early Stopping — But
// When?", Neural Networks: Tricks of the Trade, 1998: stop once the
// validation error has not improved for `patience` epochs, keep the best
// epoch's model). A pure decision over the per-epoch values: the training
// run feeds it each epoch's validation metric and asks whether this epoch
// is the best so far (its model is kept) and whether to stop.
//
// Thread-compatible; a plain value.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace tether {

class EarlyStopper {
 public:
  /// `metric`: a validation metric name (a metrics JSON key of the
  /// validation split without its "validation_" prefix: precision_at_1, ...,
  /// accuracy, auc, log_loss; log_loss is better lower, every other one
  /// higher). `patience` ≥ 0 epochs without improvement end training (0:
  /// never). `min_delta` ≥ 0: an epoch improves only by more than this.
  EarlyStopper(std::string metric, int patience, double min_delta);

  /// Whether `metric` is a name this class knows, and for which label kind:
  /// "" when it is fine for a model of `kind` ("multi-label", "binary",
  /// "multiclass"), else why not ("is not a metric of binary models: use
  /// accuracy, auc or log_loss"). The list is core/validation_metric.h's,
  /// which the config's check reads too.
  static std::string MetricProblem(const std::string& metric, const std::string& kind);

  /// Records epoch `epoch`'s value (epochs in increasing order). Returns
  /// true when it is the best so far (strictly better than the best by more
  /// than min_delta; the first epoch always is). A NaN value never improves.
  bool Add(int epoch, double value);

  /// Whether training should end after the last epoch added: `patience`
  /// epochs have passed since the best one (never with patience 0).
  bool ShouldStop() const;

  /// Puts back the state of a rule fed epochs 1 .. `last_epoch` (a resume
  /// from a checkpoint: worker/eval/validation_evaluation.h).
  void Restore(int best_epoch, double best_value, int last_epoch) {
    best_epoch_ = best_epoch;
    best_value_ = best_value;
    last_epoch_ = last_epoch;
  }

  int best_epoch() const { return best_epoch_; }  // 0 before any epoch
  double best_value() const { return best_value_; }
  int last_epoch() const { return last_epoch_; }
  const std::string& metric() const { return metric_; }
  bool higher_is_better() const { return higher_; }

 private:
  std::string metric_;
  int patience_;
  double min_delta_;
  bool higher_;
  int best_epoch_ = 0;
  int last_epoch_ = 0;
  double best_value_ = 0;
};

}  // namespace tether
