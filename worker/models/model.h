// Model: what the training loop (worker/trainer.h) needs from a workload, so
// that one loop (shuffle, pull, compute, push, clock, barrier, evaluate)
// drives every model. A Model binds a compute class (XmcMlp, SparseLr,
// DenseMlp) to the job's tables on the parameter server: it knows which rows
// or dense tables a minibatch needs, pulls them through a WorkerClient into
// buffers it owns, computes gradients on a Backend and pushes them back.
//
// Protocol, per minibatch: Pull(batch) → ComputeGradients(batch) → Push();
// for evaluation: Pull(batch) → Predict(batch). ComputeGradients and Predict
// use what the last Pull fetched, so they must get the same batch.
//
// Labels reach a model as a CSR matrix whatever the file held (the trainer
// converts): multi-label rows as read (XMC); binary rows as N × 1 with the
// entry 0 on positives; multiclass rows one-hot, N × classes.
//
// Ownership: a Model borrows the Backend and the tables (both must outlive
// it) and owns its parameter / gradient buffers, reused across minibatches.
// Thread-safety: not thread-safe; one per worker thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/status.h"
#include "compute/backend.h"
#include "input/csr.h"
#include "worker/client/client.h"

namespace tether {

/// What a model's labels are, which decides how it is evaluated.
enum class LabelKind {
  kMultiLabel,  // XMC: a set of labels per row; P@k, nDCG@k
  kBinary,      // one logit per row; accuracy, AUC, log-loss
  kMultiClass,  // one class per row; accuracy (arg max), log-loss
};

/// Rows [begin, end) of an epoch's features (N × F, global feature ids) and
/// labels (N × L, see above). Borrowed; valid while the matrices are.
struct Minibatch {
  const CsrMatrix* features = nullptr;
  const CsrMatrix* labels = nullptr;
  int64_t begin = 0;
  int64_t end = 0;
  int64_t rows() const { return end - begin; }
};

class Model {
 public:
  virtual ~Model() = default;

  /// Short name for logs: "xmc_mlp", "sparse_lr", "dense_mlp".
  virtual std::string name() const = 0;
  virtual LabelKind label_kind() const = 0;
  /// Score columns per row that Predict writes (labels, 1, or classes).
  virtual int64_t num_outputs() const = 0;

  /// Pulls the parameters the batch needs and blocks until they arrived.
  /// Errors: the client's (server ERROR_REPLY text, DeadlineExceeded).
  virtual Status Pull(const Minibatch& batch, WorkerClient* client) = 0;

  /// Forward + backward on what the last Pull fetched; returns the mean
  /// loss over the batch's rows (natural log). Errors: the compute class's
  /// InvalidArgument (shapes) or a backend error.
  virtual StatusOr<float> ComputeGradients(const Minibatch& batch) = 0;

  /// Pushes the last ComputeGradients' gradients. Asynchronous
  /// (fire-and-forget): push errors surface at the client's next Clock,
  /// Barrier or Bye (see WorkerClient).
  virtual void Push(WorkerClient* client) = 0;

  /// Pipelining (train.pipeline; docs/RUNNING.md). A model
  /// that pipelines returns true from Pipelines(); the trainer then, for
  /// each training minibatch t:
  ///   Pull(t) → Prefetch(t + 1, its clock) → ComputeAndPush(t) → Clock
  /// where Prefetch starts fetching what minibatch t + 1 needs that t's
  /// push does not change (the input rows t does not push), so that Pull(t
  /// + 1) fetches only the rest, after t's push (read-my-writes), and
  /// ComputeAndPush may push part of the gradients (the output layer's)
  /// before it computes the rest. For one worker the result is that of
  /// Pull → ComputeGradients → Push, bit for bit. A Pull of another batch
  /// than the one prefetched (evaluation, a changed batch size) waits for
  /// the prefetch, drops it and pulls everything. Defaults: no pipelining.
  virtual bool Pipelines() const { return false; }
  /// Why Pipelines() is false, for the worker's start-up log line: e.g.
  /// "consistency AVERAGE keeps a local replica". Empty when it pipelines.
  /// Default: the model has no pipelined path.
  virtual std::string PipelineOffReason() const {
    return Pipelines() ? "" : "model " + name() + " has no pipelined path (only xmc_mlp without sampled labels has)";
  }
  /// `next`: the minibatch after the one the last Pull fetched; `read_clock`:
  /// the clock at which it will be read (the client's clock, plus one when
  /// the current minibatch ends a clock). Asynchronous: errors of the
  /// fetch surface at Pull(next). Errors: as Pull's LocalizeBatch.
  virtual Status Prefetch(const Minibatch& /*next*/, int64_t /*read_clock*/, WorkerClient* /*client*/) {
    return Status::OK();
  }
  /// ComputeGradients then Push (the default), or the same with part of the
  /// push sent before the compute ends. Errors as ComputeGradients.
  virtual StatusOr<float> ComputeAndPush(const Minibatch& batch, WorkerClient* client) {
    TETHER_ASSIGN_OR_RETURN(const float loss, ComputeGradients(batch));
    Push(client);
    return loss;
  }

  /// Forward only on what the last Pull fetched: *scores = batch.rows() ×
  /// num_outputs() logits, row-major, resized. Errors as ComputeGradients.
  virtual Status Predict(const Minibatch& batch, std::vector<float>* scores) = 0;

  /// Bracket an evaluation (every Pull/Predict in between is evaluation):
  /// a model may fetch once here what every evaluation minibatch shares
  /// (the sampled-softmax XMC model pulls its whole output layer) and free
  /// it at the end. Default: nothing. Errors: the client's.
  virtual Status BeginEvaluation(WorkerClient* /*client*/) { return Status::OK(); }
  virtual void EndEvaluation() {}

  /// The model's own state that training depends on beyond the tables (a
  /// random generator's state), for checkpoints (WorkerState.model_state);
  /// RestoreState takes what SaveState gave. Default: none. Errors:
  /// InvalidArgument for bytes SaveState did not write.
  virtual std::string SaveState() const { return ""; }
  virtual Status RestoreState(const std::string& /*state*/) { return Status::OK(); }
};

// Models are created through the model registry (worker/models/model_registry.h:
// CreateModel, TablesForJob, LabelKindOf).

/// For Model implementations: the id of table `name` in `tables`, checked
/// against the kind and width (row tables: dim; dense: size) the model
/// expects (TablesForJob and the model must agree; a mismatch is a bug or a
/// hand-edited table list, reported rather than crashed on). Errors:
/// InvalidArgument naming the table, both kinds and both widths, or the
/// missing name.
StatusOr<uint32_t> FindTable(const std::vector<TableSpec>& tables, const std::string& name, TableSpec::Kind kind,
                             uint64_t width);

}  // namespace tether
