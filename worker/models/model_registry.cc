#include "worker/models/model_registry.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>

#include "core/config.h"
#include "optim/shard_budget.h"
#include "worker/models/builtin_models.h"
#include "worker/models/whole_table_budget.h"

namespace tether {
namespace {

Status FieldError(const std::string& field, const std::string& why) {
  return Status::InvalidArgument("config field " + field + ": " + why);
}

// ---------------------------------------------------------------- built-ins
// Each entry: the config fields the model reads, its tables, its labels,
// its constructor (worker/models/builtin_models.h).

// One config check: when `failed`, the model refuses the config with
// "config field `field`: `why`".
struct FieldCheck {
  bool failed;
  const char* field;
  std::string why;
};

Status FirstFailed(std::initializer_list<FieldCheck> checks) {
  for (const FieldCheck& c : checks)
    if (c.failed) return FieldError(c.field, c.why);
  return Status::OK();
}

Status ValidateXmcMlp(const JobConfig& c) {
  return FirstFailed({
      {c.data().format() == IDX, "data.format",
       "IDX data has one class per row; model.type XMC_MLP needs XMC, ARFF or LIBSVM multi-label data"},
      {c.data().num_labels() <= 0, "data.num_labels", "must be > 0 (the model's output width)"},
      {c.model().sampled_labels() > 0 && c.model().loss() != SOFTMAX, "model.sampled_labels",
       "a sampled softmax needs model.loss SOFTMAX"},
      {c.model().sampled_labels() < 0, "model.sampled_labels",
       "must be ≥ 0 (0: the full softmax), got " + std::to_string(c.model().sampled_labels())},
      {c.model().sampled_labels() > c.data().num_labels(), "model.sampled_labels",
       std::to_string(c.model().sampled_labels()) + " is above data.num_labels (" +
           std::to_string(c.data().num_labels()) + "), the rows a minibatch can sample from: use at most " +
           std::to_string(c.data().num_labels()) + ", or 0 for the full softmax"},
  });
}

// w1: row table, key = feature id, H floats; b1: dense, H; w2: row table,
// key = label id, H + 1 floats (the label's weights then its bias).
// Hashed features (data.hashed_features): w1's keys are any uint64 (num_keys
// 0), and the Glorot bound cannot use the unknown width F as fan-in; it
// uses fan-in = fan-out = H, i.e. bound init_scale · sqrt(3 / H): with rows
// of unit L2 norm (normalize_rows, or tether-gen-xmc's data) a hidden
// unit's pre-activation then has variance about 1 / H, whatever the number
// of distinct ids.
std::vector<TableSpec> XmcMlpTables(const JobConfig& c) {
  const auto h = static_cast<uint64_t>(c.model().hidden());
  const bool hashed = c.data().hashed_features();
  const double f = hashed ? static_cast<double>(h) : static_cast<double>(c.data().num_features());
  const double l = static_cast<double>(c.data().num_labels());
  std::vector<TableSpec> t;
  t.push_back(MakeTable(c, "w1", TableSpec::ROW, h, f, static_cast<double>(h)));
  t.back().set_num_keys(hashed ? 0 : static_cast<uint64_t>(c.data().num_features()));
  t.push_back(MakeTable(c, "b1", TableSpec::DENSE, h));
  t.push_back(MakeTable(c, "w2", TableSpec::ROW, h + 1, static_cast<double>(h), l));
  t.back().set_num_keys(static_cast<uint64_t>(c.data().num_labels()));
  return t;
}

// The full softmax reads every label's row of w2 each minibatch; a sampled
// one reads model.sampled_labels of them.
std::vector<std::string> XmcMlpReadWhole(const JobConfig& c) {
  if (c.model().sampled_labels() > 0) return {};
  return {"w2"};
}

Status ValidateSparseLr(const JobConfig& c) {
  return FirstFailed({
      {c.data().format() != LIBSVM, "data.format",
       "model.type SPARSE_LR reads LIBSVM binary data (labels ±1 or 0/1)"},
      {c.data().num_labels() > 1, "data.num_labels", "must be 0 or 1 for model.type SPARSE_LR (one logit per row)"},
  });
}

// w: row table, key = feature id, one float; b: dense, one float. Zero
// init: the logistic loss is convex, so there is no symmetry to break.
std::vector<TableSpec> SparseLrTables(const JobConfig& c) {
  std::vector<TableSpec> t;
  t.push_back(MakeTable(c, "w", TableSpec::ROW, 1));
  // Hashed features: any uint64 key (num_keys 0).
  t.back().set_num_keys(c.data().hashed_features() ? 0 : static_cast<uint64_t>(c.data().num_features()));
  t.push_back(MakeTable(c, "b", TableSpec::DENSE, 1));
  return t;
}

Status ValidateDenseMlp(const JobConfig& c) {
  int64_t narrowest = 1;
  for (int w : c.model().hidden_layers()) narrowest = std::min<int64_t>(narrowest, w);
  return FirstFailed({
      {c.data().format() == XMC || c.data().format() == ARFF, "data.format",
       "model.type DENSE_MLP reads single-label LIBSVM or IDX data"},
      {c.data().num_labels() < 2, "data.num_labels", "must be ≥ 2 for model.type DENSE_MLP (the number of classes)"},
      {narrowest < 1, "model.hidden_layers", "every width must be ≥ 1, got " + std::to_string(narrowest)},
      {c.data().hashed_features(), "data.hashed_features",
       "model.type DENSE_MLP has a dense input layer of data.num_features columns; hashed 64-bit ids need a "
       "sparse model (XMC_MLP, SPARSE_LR)"},
  });
}

// For layer i = 1..n: "wi" (dense, d(i-1) × di row-major: row = input unit)
// and "bi" (dense, di, zeros); range-partitioned over the shards.
std::vector<TableSpec> DenseMlpTables(const JobConfig& c) {
  const std::vector<int64_t> widths = DenseMlpLayerWidths(c);
  std::vector<TableSpec> t;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    const std::string layer = std::to_string(i + 1);
    const auto in = static_cast<uint64_t>(widths[i]), out = static_cast<uint64_t>(widths[i + 1]);
    t.push_back(
        MakeTable(c, "w" + layer, TableSpec::DENSE, in * out, static_cast<double>(in), static_cast<double>(out)));
    t.push_back(MakeTable(c, "b" + layer, TableSpec::DENSE, out));
  }
  return t;
}

std::vector<ModelInfo> BuiltinModels() {
  return {
      {"xmc_mlp", LabelKind::kMultiLabel, ValidateXmcMlp, XmcMlpTables, CreateXmcMlpModel, XmcMlpReadWhole},
      {"sparse_lr", LabelKind::kBinary, ValidateSparseLr, SparseLrTables, CreateSparseLrModel, nullptr},
      {"dense_mlp", LabelKind::kMultiClass, ValidateDenseMlp, DenseMlpTables, CreateDenseMlpModel, nullptr},
  };
}

struct Registry {
  std::mutex mu;
  std::map<std::string, ModelInfo> models;
};

// The built-ins are added on first use, so a model registered from another
// translation unit's static initialiser finds the registry ready whatever
// the initialisation order.
Registry& GetRegistry() {
  static Registry* r = [] {
    auto* reg = new Registry;
    for (ModelInfo& m : BuiltinModels()) reg->models.emplace(m.name, std::move(m));
    return reg;
  }();
  return *r;
}

std::string NameOfType(ModelType type) {
  switch (type) {
    case SPARSE_LR: return "sparse_lr";
    case DENSE_MLP: return "dense_mlp";
    default: return "xmc_mlp";
  }
}

}  // namespace

bool RegisterModel(ModelInfo info) {
  CHECK(!info.name.empty()) << "RegisterModel: a model needs a name";
  CHECK(info.tables && info.create) << "RegisterModel: model " << info.name << " needs tables and create";
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  const std::string name = info.name;
  CHECK(r.models.emplace(name, std::move(info)).second) << "RegisterModel: model " << name << " registered twice";
  return true;
}

std::vector<std::string> RegisteredModelNames() {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto& [name, info] : r.models) names.push_back(name);
  return names;
}

StatusOr<const ModelInfo*> FindModel(const JobConfig& config) {
  const bool by_name = !config.model().name().empty();
  const std::string name = by_name ? config.model().name() : NameOfType(config.model().type());
  Registry& r = GetRegistry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = r.models.find(name);
    if (it != r.models.end()) return &it->second;
  }
  std::string list;
  for (const auto& n : RegisteredModelNames()) list += (list.empty() ? "" : ", ") + n;
  return FieldError(by_name ? "model.name" : "model.type",
                    "no registered model '" + name + "' (registered: " + list + ")");
}

TableSpec MakeTable(const JobConfig& config, const std::string& name, TableSpec::Kind kind, uint64_t width,
                    double fan_in, double fan_out) {
  TableSpec t;
  t.set_name(name);
  t.set_kind(kind);
  if (kind == TableSpec::ROW) {
    t.set_dim(static_cast<uint32_t>(width));
  } else {
    t.set_size(width);
  }
  if (fan_in > 0) {
    t.mutable_init()->set_kind(TableInitializer::UNIFORM);
    t.mutable_init()->set_bound(config.model().init_scale() * static_cast<float>(std::sqrt(6.0 / (fan_in + fan_out))));
  } else {
    t.mutable_init()->set_kind(TableInitializer::ZEROS);
  }
  return t;
}

// The table's wire encodings: train.wire, then the table section's `wire`,
// then its pull_wire / push_wire.
static void SetTableWire(const JobConfig& config, TableSpec* t) {
  WireEncoding pull = config.train().wire(), push = config.train().wire();
  for (const auto& tc : config.table()) {
    if (tc.name() != t->name()) continue;
    if (tc.has_wire()) pull = push = tc.wire();
    if (tc.has_pull_wire()) pull = tc.pull_wire();
    if (tc.has_push_wire()) push = tc.push_wire();
  }
  // FP32 stays unset: a HELLO of float32 tables reads as before.
  if (pull != FP32) t->set_pull_wire(pull);
  if (push != FP32) t->set_push_wire(push);
}

std::vector<TableSpec> TablesForJob(const JobConfig& config) {
  StatusOr<const ModelInfo*> model = FindModel(config);
  if (!model.ok()) return {};
  std::vector<TableSpec> tables = (*model)->tables(config);
  for (size_t i = 0; i < tables.size(); ++i) {
    TableSpec& t = tables[i];
    t.set_id(static_cast<uint32_t>(i));
    OptimizerConfig o = config.optimizer();
    for (const auto& tc : config.table())
      if (tc.name() == t.name()) o.MergeFrom(tc.optimizer());
    *t.mutable_optimizer() = o;
    // Delay compensation: a shard backs up each worker rank's reads.
    if (o.delay_compensation() > 0) t.set_backup_workers(static_cast<uint32_t>(MaxWorkers(config.cluster())));
    *t.mutable_consistency() = ConsistencyForTable(config, t.name());
    // Worker memory settings are a process's, not the tables' contract
    // (workers may differ): they never travel in a TableSpec.
    t.mutable_consistency()->clear_cache_capacity_bytes();
    t.mutable_consistency()->clear_cache_capacity_fraction();
    t.mutable_consistency()->clear_memory_limit_bytes();
    t.mutable_init()->set_seed(config.train().seed());
    for (const auto& tc : config.table())
      if (tc.name() == t.name() && tc.init() == INIT_ZEROS) {  // per-table init override
        t.mutable_init()->set_kind(TableInitializer::ZEROS);
        t.mutable_init()->set_bound(0);
      }
    if (IsRowTable(t)) t.set_key_base(config.data().index_base());
    SetTableWire(config, &t);
    // Unset stays unset: a HELLO of tables without a budget reads as before.
    if (const TableBudget b = BudgetForTable(config, t.name()); b.ByteSizeLong() > 0) *t.mutable_budget() = b;
  }
  // The shard budget's row limits travel in the specs (a budget too small
  // leaves them unchanged; ValidateModelConfig refuses it).
  (void)ApplyServerMemoryBudget(config.cluster().server_memory_bytes(), config.cluster().num_servers(), &tables);
  return tables;
}

Status ValidateModelConfig(const JobConfig& config) {
  TETHER_ASSIGN_OR_RETURN(const ModelInfo* model, FindModel(config));
  if (model->validate) TETHER_RETURN_IF_ERROR(model->validate(config));
  const std::vector<TableSpec> tables = TablesForJob(config);
  for (const auto& tc : config.table()) {
    if (std::none_of(tables.begin(), tables.end(), [&](const TableSpec& t) { return t.name() == tc.name(); })) {
      std::string list;
      for (const auto& t : tables) list += (list.empty() ? "" : ", ") + t.name();
      return FieldError("table.name", "unknown table '" + tc.name() + "' (model " + model->name + " has " + list + ")");
    }
  }
  TETHER_RETURN_IF_ERROR(ValidateTableSpecs(tables, config.cluster().num_servers()));
  std::vector<TableSpec> split = tables;  // already split when the budget holds them: changes nothing then
  if (const auto rows = ApplyServerMemoryBudget(config.cluster().server_memory_bytes(),
                                                config.cluster().num_servers(), &split);
      !rows.ok())
    return FieldError("cluster.server_memory_bytes", rows.status().message());
  if (model->read_whole)
    TETHER_RETURN_IF_ERROR(CheckWholeTableBudgets(config, tables, model->read_whole(config), model->name));
  return Status::OK();
}

LabelKind LabelKindOf(const JobConfig& config) {
  StatusOr<const ModelInfo*> model = FindModel(config);
  return model.ok() ? (*model)->label_kind : LabelKind::kMultiLabel;
}

StatusOr<std::unique_ptr<Model>> CreateModel(const JobConfig& config, const std::vector<TableSpec>& tables,
                                             Backend* backend, int rank) {
  if (backend == nullptr) return Status::InvalidArgument("CreateModel: null backend");
  TETHER_ASSIGN_OR_RETURN(const ModelInfo* model, FindModel(config));
  return model->create(config, tables, backend, rank);
}

std::vector<int64_t> DenseMlpLayerWidths(const JobConfig& config) {
  std::vector<int64_t> widths{config.data().num_features()};
  if (config.model().hidden_layers_size() == 0) {
    widths.push_back(config.model().hidden());
  } else {
    for (int w : config.model().hidden_layers()) widths.push_back(w);
  }
  widths.push_back(config.data().num_labels());
  return widths;
}

}  // namespace tether
