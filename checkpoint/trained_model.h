// A trained model as plain tensors in memory: the job's config and every
// table's trained values, without optimizer state. The one type between
// checkpoints (LoadTrainedModel below reads one) and the model files users
// keep (checkpoint/model_file.h: tether-export writes safetensors or npz,
// tether-predict reads them back).
//
// Shapes: a ROW table holds `keys.size()` rows, sorted by key, each of
// spec.dim() floats (values is keys.size() × dim, row-major); a key absent
// from `keys` was never trained, and its row is spec.init()'s value for it
// (InitialWeight, core/table_spec.h). A DENSE table holds spec.size() floats in
// `values` and no keys.
//
// Ownership: plain values. Thread-safety: as any struct.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "proto/config.pb.h"
#include "proto/tables.pb.h"

namespace tether {

struct TrainedTable {
  TableSpec spec;               // as the job declared it (id, name, kind, shape, initializer)
  std::vector<uint64_t> keys;   // ROW: sorted, unique; DENSE: empty
  std::vector<float> values;    // ROW: keys.size() × dim; DENSE: size
};

struct TrainedModel {
  JobConfig config;                  // the job's config (model, data settings: index base, scaling)
  std::string job_id;
  uint64_t generation = 0;
  int64_t clock = 0;                 // the checkpoint's clock (completed clocks of every worker)
  std::vector<TrainedTable> tables;  // in table id order
};

/// Row `key` of row table `t` into out (t.spec.dim() floats): the trained
/// row, or, for a key never trained, its initializer's value (0 for ZEROS,
/// InitialWeight for UNIFORM), as a server would have created it.
/// O(log rows).
void TrainedRow(const TrainedTable& t, uint64_t key, float* out);

/// The trained weights of a checkpoint (`path` as for ResolveCheckpoint,
/// checkpoint/checkpoint.h), optimizer state left out; every file is
/// verified. Needs no server: it reads the shard files
/// (checkpoint/shard_file.h) of any number of shards. Errors: as
/// ResolveCheckpoint, ReadManifest, ReadShardFile.
StatusOr<TrainedModel> LoadTrainedModel(const std::string& path);

}  // namespace tether
