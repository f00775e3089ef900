// The model registry: the one place that maps a model to its tables, its
// config checks, its label kind and its constructor. Servers know no model:
// a worker derives its tables here and declares them at HELLO (TableSpec,
// core/table_spec.h), so adding a model is one registry entry plus one Model
// class (worker/models/model.h), and nothing on the server side.
//
// A model is selected by `model.name` when set, else by `model.type`
// (XMC_MLP → "xmc_mlp", SPARSE_LR → "sparse_lr", DENSE_MLP → "dense_mlp").
// Models outside the library (a test's, a user's) register themselves at
// static-initialisation time with TETHER_REGISTER_MODEL in their own .cc,
// which must be linked into the executable (not only into a static library,
// whose unreferenced objects the linker drops).
//
// Thread-safety: registration and lookups are serialised by a mutex;
// entries are never removed, so a returned ModelInfo* stays valid for the
// life of the process.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/table_spec.h"
#include "proto/config.pb.h"
#include "proto/tables.pb.h"
#include "compute/backend.h"
#include "worker/models/model.h"

namespace tether {

/// One registered model.
struct ModelInfo {
  std::string name;  // "xmc_mlp": model.name selects it
  LabelKind label_kind = LabelKind::kMultiLabel;
  /// Checks the config fields the model reads (data format, widths, layer
  /// list); errors are InvalidArgument "config field F: why". May be empty.
  std::function<Status(const JobConfig&)> validate;
  /// The model's tables in id order, with name, kind, dim or size and
  /// initializer (kind and Glorot bound); num_keys for row tables keyed by
  /// data ids. Optimizer, consistency, seed, key base and per-table
  /// overrides are filled in by TablesForJob. Called on validated configs.
  std::function<std::vector<TableSpec>(const JobConfig&)> tables;
  /// The model over `tables` (TablesForJob's, which outlive it) computing on
  /// `backend` (borrowed, outlives it) for worker `rank`. Errors:
  /// InvalidArgument when a table is missing or misshapen.
  std::function<StatusOr<std::unique_ptr<Model>>(const JobConfig&, const std::vector<TableSpec>& tables,
                                                 Backend* backend, int rank)>
      create;
  /// The row tables every training minibatch reads whole (all their keys),
  /// whose row budgets must hold a shard's share of them
  /// (worker/models/whole_table_budget.h). May be empty.
  std::function<std::vector<std::string>(const JobConfig&)> read_whole;
};

/// Adds `info` under info.name. Returns true; dies on a duplicate name or a
/// missing `tables`/`create` (a programming error at start-up).
bool RegisterModel(ModelInfo info);

/// The model `config` selects (model.name, else model.type). Errors:
/// InvalidArgument naming the field and the registered names.
StatusOr<const ModelInfo*> FindModel(const JobConfig& config);

/// Every registered name, sorted.
std::vector<std::string> RegisteredModelNames();

/// The tables of the job's model, ids 0.., identical on every process of a
/// job: the model's own (ModelInfo::tables) with the job's optimizer merged
/// with each table's `table { optimizer }` override, consistency merged by
/// ConsistencyForTable, initializer seed train.seed, `table { init:
/// INIT_ZEROS }` applied, and row tables' key_base data.index_base. Empty
/// when the model is not registered (ValidateModelConfig says so).
std::vector<TableSpec> TablesForJob(const JobConfig& config);

/// The model's checks (ModelInfo::validate), that every `table { name }`
/// names one of its tables, and ValidateTableSpecs over TablesForJob for
/// cluster.num_servers shards (sizes, C15 message limits). Run by the worker
/// before it reads data or connects, and by tether-launch before it starts
/// anything. Errors: InvalidArgument naming the field or the table.
Status ValidateModelConfig(const JobConfig& config);

/// The label kind of the job's model (kMultiLabel when it is not registered).
LabelKind LabelKindOf(const JobConfig& config);

/// The job's model (ModelInfo::create of FindModel). Errors: FindModel's and
/// the constructor's.
StatusOr<std::unique_ptr<Model>> CreateModel(const JobConfig& config, const std::vector<TableSpec>& tables,
                                             Backend* backend, int rank = 0);

/// DENSE_MLP layer widths: data.num_features, then model.hidden_layers (or
/// model.hidden when that list is empty), then data.num_labels.
std::vector<int64_t> DenseMlpLayerWidths(const JobConfig& config);

/// A row or dense table for ModelInfo::tables: `width` is dim (row) or size
/// (dense); a uniform initializer gets init_scale · sqrt(6 / (fan_in +
/// fan_out)) (Glorot & Bengio, AISTATS 2010); fan_in = 0 means zeros.
/// With data.hashed_features the input width is unknown: the built-in
/// XMC_MLP then gives w1 fan_in = fan_out = model.hidden (H), a bound of
/// init_scale · sqrt(3 / H), and num_keys 0 (any uint64 key); SPARSE_LR's
/// w stays zeros. A registered model reading hashed data decides its own.
TableSpec MakeTable(const JobConfig& config, const std::string& name, TableSpec::Kind kind, uint64_t width,
                    double fan_in = 0, double fan_out = 0);

}  // namespace tether

#define TETHER_MODEL_CONCAT_INNER(a, b) a##b
#define TETHER_MODEL_CONCAT(a, b) TETHER_MODEL_CONCAT_INNER(a, b)
/// Registers a ModelInfo built by the expression `info` at static
/// initialisation: TETHER_REGISTER_MODEL(MyModelInfo());
#define TETHER_REGISTER_MODEL(info) \
  static const bool TETHER_MODEL_CONCAT(tether_model_registered_, __LINE__) = ::tether::RegisterModel(info)
