#include "serving/scorer.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "core/memory_fit.h"
#include "core/table_spec.h"
#include "worker/models/dense_mlp.h"
#include "worker/models/model_registry.h"
#include "worker/models/sparse_lr.h"
#include "worker/models/xmc_mlp.h"

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
    for (size_t i = 0; i < keys_.size(); ++i) TrainedRow(*shared_->w1, keys_[i], w1_.data() + i * h);
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
    for (size_t i = 0; i < keys_.size(); ++i) TrainedRow(*shared_->w, keys_[i], &w_[i]);
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
    TrainedRow(*w2, static_cast<uint64_t>(i), xmc->w2.data() + i * (h + 1));
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

namespace {

// ---------------------------------------------------------------- ensemble

// How an ensemble averages a model's scores.
enum class Link { kSoftmax, kSigmoid };

Link LinkOf(const JobConfig& c) {
  const LabelKind kind = LabelKindOf(c);
  if (kind == LabelKind::kBinary) return Link::kSigmoid;
  if (kind == LabelKind::kMultiLabel && c.model().loss() == BCE) return Link::kSigmoid;
  return Link::kSoftmax;
}

// log(exp(a) + exp(b)) without overflow; -inf is the empty sum.
double LogAdd(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  const double m = std::max(a, b);
  return m + std::log1p(std::exp(-std::fabs(a - b)));
}

// log σ(x) = −softplus(−x), stably.
double LogSigmoid(double x) { return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }

class EnsembleScorer final : public Scorer {
 public:
  // made: OK, or why a member's backend could not be made (Score returns it).
  EnsembleScorer(std::vector<std::unique_ptr<Scorer>> members, int64_t outputs, Link link, Status made)
      : members_(std::move(members)), outputs_(outputs), link_(link), made_(std::move(made)) {}

  Status Score(const CsrMatrix& x, int64_t begin, int64_t end, std::vector<float>* scores) override {
    TETHER_RETURN_IF_ERROR(made_);
    const int64_t n = (end - begin) * outputs_;
    // Running log of the summed probabilities (and, for sigmoid models, of
    // the summed complements), in double.
    log_p_.assign(n, -INFINITY);
    log_q_.assign(link_ == Link::kSigmoid ? n : 0, -INFINITY);
    for (auto& m : members_) {
      TETHER_RETURN_IF_ERROR(m->Score(x, begin, end, &one_));
      if (link_ == Link::kSigmoid) {
        for (int64_t i = 0; i < n; ++i) {
          log_p_[i] = LogAdd(log_p_[i], LogSigmoid(one_[i]));
          log_q_[i] = LogAdd(log_q_[i], LogSigmoid(-static_cast<double>(one_[i])));
        }
        continue;
      }
      for (int64_t r = 0; r < end - begin; ++r) {
        const float* s = one_.data() + r * outputs_;
        double lse = -INFINITY;
        for (int64_t j = 0; j < outputs_; ++j) lse = LogAdd(lse, s[j]);
        for (int64_t j = 0; j < outputs_; ++j) log_p_[r * outputs_ + j] = LogAdd(log_p_[r * outputs_ + j], s[j] - lse);
      }
    }
    // The mean's 1/N cancels in the logit; for softmax it is log N off
    // every score of a row, kept so the scores are log probabilities.
    const double log_n = std::log(static_cast<double>(members_.size()));
    scores->resize(n);
    for (int64_t i = 0; i < n; ++i)
      (*scores)[i] = static_cast<float>(link_ == Link::kSigmoid ? log_p_[i] - log_q_[i] : log_p_[i] - log_n);
    return Status::OK();
  }

 private:
  std::vector<std::unique_ptr<Scorer>> members_;
  const int64_t outputs_;
  const Link link_;
  const Status made_;
  std::vector<float> one_;
  std::vector<double> log_p_, log_q_;
};

}  // namespace

std::string EnsembleMismatch(const JobConfig& a, const JobConfig& b) {
  const auto differ = [](const std::string& field, const std::string& x, const std::string& y) {
    return x == y ? std::string() : field + ": " + x + " vs " + y;
  };
  const auto num = [](double v) {
    std::ostringstream os;
    os << v;
    return os.str();
  };
  for (const std::string& d :
       {differ("model", ModelKindName(a), ModelKindName(b)),
        differ("data.num_features", std::to_string(a.data().num_features()), std::to_string(b.data().num_features())),
        differ("data.num_labels", std::to_string(a.data().num_labels()), std::to_string(b.data().num_labels())),
        differ("model.loss", LossType_Name(a.model().loss()), LossType_Name(b.model().loss())),
        differ("data.index_base", std::to_string(a.data().index_base()), std::to_string(b.data().index_base())),
        differ("data.label_base", std::to_string(a.data().label_base()), std::to_string(b.data().label_base())),
        differ("data.feature_scale", num(a.data().feature_scale()), num(b.data().feature_scale())),
        differ("data.feature_offset", num(a.data().feature_offset()), num(b.data().feature_offset())),
        differ("data.normalize_rows", a.data().normalize_rows() ? "true" : "false",
               b.data().normalize_rows() ? "true" : "false"),
        differ("data.tf_idf", a.data().tf_idf() ? "true" : "false", b.data().tf_idf() ? "true" : "false")}) {
    if (!d.empty()) return d;
  }
  return "";
}

StatusOr<ScorerSet> MakeEnsembleScorerSet(const std::vector<const TrainedModel*>& models, const std::string& device) {
  if (models.empty()) return Status::InvalidArgument("an ensemble needs at least one model");
  std::vector<ScorerSet> sets;
  for (size_t i = 0; i < models.size(); ++i) {
    if (i > 0) {
      const std::string d = EnsembleMismatch(models[0]->config, models[i]->config);
      if (!d.empty())
        return Status::InvalidArgument("model " + std::to_string(i + 1) + " of the ensemble differs from model 1 in " +
                                       d + ": an ensemble averages models that score the same outputs from the "
                                       "same input");
    }
    TETHER_ASSIGN_OR_RETURN(ScorerSet s, MakeScorerSet(*models[i]));
    sets.push_back(std::move(s));
  }
  ScorerSet set;
  set.outputs = sets[0].outputs;
  const Link link = LinkOf(models[0]->config);
  set.make = [sets, link, device, outputs = set.outputs](std::unique_ptr<Backend> backend) -> std::unique_ptr<Scorer> {
    std::vector<std::unique_ptr<Scorer>> members;
    members.push_back(sets[0].make(std::move(backend)));
    Status made;
    for (size_t i = 1; i < sets.size() && made.ok(); ++i) {
      StatusOr<std::unique_ptr<Backend>> b = CreateBackend(device, 1);
      if (!b.ok()) {
        made = b.status();
        break;
      }
      members.push_back(sets[i].make(std::move(b).value()));
    }
    return std::make_unique<EnsembleScorer>(std::move(members), outputs, link, std::move(made));
  };
  return set;
}

std::string ModelKindName(const JobConfig& c) {
  if (!c.model().name().empty()) return c.model().name();
  switch (c.model().type()) {
    case XMC_MLP: return "xmc_mlp";
    case SPARSE_LR: return "sparse_lr";
    case DENSE_MLP: return "dense_mlp";
  }
  return "?";
}

Status CheckModelTables(const TrainedModel& model) {
  const std::string name = ModelKindName(model.config);
  if (name != "xmc_mlp" && name != "sparse_lr" && name != "dense_mlp") return Status::OK();
  google::protobuf::RepeatedPtrField<TableSpec> from_config, in_file;
  for (const TableSpec& t : TablesForJob(model.config)) *from_config.Add() = t;
  for (const TrainedTable& t : model.tables) *in_file.Add() = t.spec;
  if (const std::string diff = DiffTableShapes(in_file, from_config, "the file's tables", "its job_config", "");
      !diff.empty())
    return Status::InvalidArgument("the model's config and its tables disagree: " + diff);
  return Status::OK();
}

Status CheckModelShape(const TrainedModel& model) {
  TETHER_RETURN_IF_ERROR(CheckModelTables(model));
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
