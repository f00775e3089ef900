#include "serving/scorer.h"

#include <algorithm>

#include "checkpoint/checkpoint.h"
#include "core/memory_fit.h"
#include "core/table_spec.h"
#include "worker/dense_mlp.h"
#include "worker/model_registry.h"
#include "worker/sparse_lr.h"
#include "worker/xmc_mlp.h"

namespace tether {
namespace {

const TrainedTable* FindTrained(const TrainedModel& m, const std::string& name) {
  for (const TrainedTable& t : m.tables)
    if (t.spec.name() == name) return &t;
  return nullptr;
}

StatusOr<const TrainedTable*> Table(const TrainedModel& m, const std::string& name, TableSpec::Kind kind,
                                    uint64_t width) {
  const TrainedTable* t = FindTrained(m, name);
  if (t == nullptr) return Status::InvalidArgument("the model has no table '" + name + "'");
  const uint64_t have = IsRowTable(t->spec) ? t->spec.dim() : t->spec.size();
  if (t->spec.kind() != kind || have != width)
    return Status::InvalidArgument("table '" + name + "' is a " + (IsRowTable(t->spec) ? "row" : "dense") +
                                   " table of width " + std::to_string(have) + "; the model needs a " +
                                   (kind == TableSpec::ROW ? "row" : "dense") + " table of width " +
                                   std::to_string(width));
  return t;
}

// Row `key` of a trained row table into out (dim floats): the trained row,
// or the initializer's value for a key never trained.
void RowOf(const TrainedTable& t, uint64_t key, float* out) {
  const uint32_t dim = t.spec.dim();
  const auto it = std::lower_bound(t.keys.begin(), t.keys.end(), key);
  if (it != t.keys.end() && *it == key) {
    std::copy_n(t.values.data() + (it - t.keys.begin()) * dim, dim, out);
    return;
  }
  const bool zeros = t.spec.init().kind() == TableInitializer::ZEROS;
  for (uint32_t j = 0; j < dim; ++j)
    out[j] = zeros ? 0.0f : InitialWeight(t.spec.init().seed(), t.spec.id(), key, j, t.spec.init().bound());
}

// XMC MLP (and its sampled-softmax variant, which has the same tables):
// w2 (L × (H + 1), bias last) is gathered once and shared; each block
// gathers the w1 rows of its features.
struct XmcShared {
  XmcMlpShape shape;
  const TrainedTable* w1 = nullptr;
  std::vector<float> b1, w2, b2;
};

class XmcScorer final : public Scorer {
 public:
  XmcScorer(std::shared_ptr<const XmcShared> shared, std::unique_ptr<Backend> backend)
      : shared_(std::move(shared)), backend_(std::move(backend)), model_(shared_->shape, backend_.get()) {}
  Status Score(const CsrMatrix& x, int64_t begin, int64_t end, std::vector<float>* scores) override {
    TETHER_RETURN_IF_ERROR(LocalizeBatch(x, begin, end, &keys_, &x_local_));
    const int64_t h = shared_->shape.hidden;
    w1_.resize(keys_.size() * h);
    for (size_t i = 0; i < keys_.size(); ++i) RowOf(*shared_->w1, keys_[i], w1_.data() + i * h);
    const XmcParams p{w1_.data(), static_cast<int64_t>(keys_.size()), shared_->b1.data(), shared_->w2.data(),
                      shared_->b2.data(), /*w2_stride=*/h + 1};
    return model_.Predict(x_local_, p, scores);
  }

 private:
  std::shared_ptr<const XmcShared> shared_;
  std::unique_ptr<Backend> backend_;
  XmcMlp model_;
  std::vector<uint64_t> keys_;
  CsrMatrix x_local_;
  std::vector<float> w1_;
};

struct LrShared {
  int64_t num_features = 0;
  const TrainedTable* w = nullptr;
  float b = 0;
};

class LrScorer final : public Scorer {
 public:
  LrScorer(std::shared_ptr<const LrShared> shared, std::unique_ptr<Backend> backend)
      : shared_(std::move(shared)), backend_(std::move(backend)), model_(shared_->num_features, backend_.get()) {}
  Status Score(const CsrMatrix& x, int64_t begin, int64_t end, std::vector<float>* scores) override {
    TETHER_RETURN_IF_ERROR(LocalizeBatch(x, begin, end, &keys_, &x_local_));
    w_.resize(keys_.size());
    for (size_t i = 0; i < keys_.size(); ++i) RowOf(*shared_->w, keys_[i], &w_[i]);
    const SparseLrParams p{w_.data(), static_cast<int64_t>(keys_.size()), &shared_->b};
    return model_.Predict(x_local_, p, scores);
  }

 private:
  std::shared_ptr<const LrShared> shared_;
  std::unique_ptr<Backend> backend_;
  SparseLr model_;
  std::vector<uint64_t> keys_;
  CsrMatrix x_local_;
  std::vector<float> w_;
};

struct DenseShared {
  std::vector<int64_t> widths;
  DenseMlpParams params;  // points into the TrainedModel's dense tables
  float offset = 0;       // data.feature_offset
};

class DenseScorer final : public Scorer {
 public:
  DenseScorer(std::shared_ptr<const DenseShared> shared, std::unique_ptr<Backend> backend)
      : shared_(std::move(shared)), backend_(std::move(backend)), model_(shared_->widths, backend_.get()) {}
  Status Score(const CsrMatrix& x, int64_t begin, int64_t end, std::vector<float>* scores) override {
    DensifyRows(x, begin, end, &x_);
    if (shared_->offset != 0.0f)
      for (float& v : x_) v += shared_->offset;
    return model_.Predict(x_.data(), end - begin, shared_->params, scores);
  }

 private:
  std::shared_ptr<const DenseShared> shared_;
  std::unique_ptr<Backend> backend_;
  DenseMlp model_;
  std::vector<float> x_;
};

StatusOr<ScorerSet> XmcScorers(const TrainedModel& model) {
  const JobConfig& c = model.config;
  auto xmc = std::make_shared<XmcShared>();
  xmc->shape.num_features = c.data().num_features();
  xmc->shape.hidden = c.model().hidden();
  xmc->shape.num_labels = c.data().num_labels();
  xmc->shape.loss = c.model().loss() == BCE ? XmcLoss::kBce : XmcLoss::kSoftmax;
  const auto h = static_cast<uint64_t>(xmc->shape.hidden);
  TETHER_ASSIGN_OR_RETURN(xmc->w1, Table(model, "w1", TableSpec::ROW, h));
  TETHER_ASSIGN_OR_RETURN(const TrainedTable* b1, Table(model, "b1", TableSpec::DENSE, h));
  TETHER_ASSIGN_OR_RETURN(const TrainedTable* w2, Table(model, "w2", TableSpec::ROW, h + 1));
  xmc->b1 = b1->values;
  const int64_t l = xmc->shape.num_labels;
  xmc->w2.resize(l * (h + 1));
  xmc->b2.resize(l);
  for (int64_t i = 0; i < l; ++i) {
    RowOf(*w2, static_cast<uint64_t>(i), xmc->w2.data() + i * (h + 1));
    xmc->b2[i] = xmc->w2[i * (h + 1) + h];
  }
  ScorerSet set;
  set.outputs = l;
  set.make = [xmc](std::unique_ptr<Backend> b) { return std::make_unique<XmcScorer>(xmc, std::move(b)); };
  return set;
}

StatusOr<ScorerSet> LrScorers(const TrainedModel& model) {
  auto lr = std::make_shared<LrShared>();
  lr->num_features = model.config.data().num_features();
  TETHER_ASSIGN_OR_RETURN(lr->w, Table(model, "w", TableSpec::ROW, 1));
  TETHER_ASSIGN_OR_RETURN(const TrainedTable* b, Table(model, "b", TableSpec::DENSE, 1));
  lr->b = b->values[0];
  ScorerSet set;
  set.outputs = 1;
  set.make = [lr](std::unique_ptr<Backend> b) { return std::make_unique<LrScorer>(lr, std::move(b)); };
  return set;
}

StatusOr<ScorerSet> DenseScorers(const TrainedModel& model) {
  auto dense = std::make_shared<DenseShared>();
  dense->widths = DenseMlpLayerWidths(model.config);
  dense->offset = model.config.data().feature_offset();
  for (size_t i = 0; i + 1 < dense->widths.size(); ++i) {
    const std::string layer = std::to_string(i + 1);
    TETHER_ASSIGN_OR_RETURN(const TrainedTable* w,
                            Table(model, "w" + layer, TableSpec::DENSE,
                                  static_cast<uint64_t>(dense->widths[i] * dense->widths[i + 1])));
    TETHER_ASSIGN_OR_RETURN(const TrainedTable* b, Table(model, "b" + layer, TableSpec::DENSE,
                                                         static_cast<uint64_t>(dense->widths[i + 1])));
    dense->params.w.push_back(w->values.data());
    dense->params.b.push_back(b->values.data());
  }
  ScorerSet set;
  set.outputs = dense->widths.back();
  set.make = [dense](std::unique_ptr<Backend> b) { return std::make_unique<DenseScorer>(dense, std::move(b)); };
  return set;
}

}  // namespace

std::string ModelKindName(const JobConfig& c) {
  if (!c.model().name().empty()) return c.model().name();
  switch (c.model().type()) {
    case XMC_MLP: return "xmc_mlp";
    case SPARSE_LR: return "sparse_lr";
    case DENSE_MLP: return "dense_mlp";
  }
  return "?";
}

Status CheckModelShape(const TrainedModel& model) {
  const std::string name = ModelKindName(model.config);
  if (name != "xmc_mlp" && name != "sparse_lr" && name != "dense_mlp") return Status::OK();
  google::protobuf::RepeatedPtrField<TableSpec> from_config, in_file;
  for (const TableSpec& t : TablesForJob(model.config)) *from_config.Add() = t;
  for (const TrainedTable& t : model.tables) *in_file.Add() = t.spec;
  if (const std::string diff = DiffTableShapes(in_file, from_config, "the file's tables", "its job_config", "");
      !diff.empty())
    return Status::InvalidArgument("the model's config and its tables disagree: " + diff);
  // What scoring allocates beyond the tables: XMC gathers the whole output
  // layer, every label's row (trained or not) and bias.
  if (ModelKindName(model.config) != "xmc_mlp") return Status::OK();
  const uint64_t labels = static_cast<uint64_t>(model.config.data().num_labels());
  const uint64_t bytes = labels * (static_cast<uint64_t>(model.config.model().hidden()) + 2) * sizeof(float);
  const MemoryBudget budget = MemoryBudgetFor(JobConfig{});
  if (budget.bytes > 0 && bytes > budget.bytes)
    return Status::ResourceExhausted("scoring needs the output layer of " + std::to_string(labels) + " labels × " +
                                     std::to_string(model.config.model().hidden() + 1) + " weights, " +
                                     FormatBytes(bytes) + ", more than the " + FormatBytes(budget.bytes) +
                                     " this process may use (" + budget.source + ")");
  return Status::OK();
}

StatusOr<ScorerSet> MakeScorerSet(const TrainedModel& model) {
  const std::string name = ModelKindName(model.config);
  TETHER_RETURN_IF_ERROR(CheckModelShape(model));
  if (name == "xmc_mlp") return XmcScorers(model);
  if (name == "sparse_lr") return LrScorers(model);
  if (name == "dense_mlp") return DenseScorers(model);
  return Status::InvalidArgument("model '" + name +
                                 "' cannot be scored here: tether-predict knows xmc_mlp, sparse_lr and dense_mlp");
}

}  // namespace tether
