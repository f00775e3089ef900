#include "checkpoint/trained_model.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "checkpoint/checkpoint.h"
#include "checkpoint/shard_file.h"
#include "core/memory_fit.h"
#include "core/table_spec.h"

namespace tether {

void TrainedRow(const TrainedTable& t, uint64_t key, float* out) {
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

namespace {

// The dense tables are allocated whole from the manifest's sizes before the
// shard files are read: sizes that the files cannot hold (every weight of a
// dense table is in some shard file) or that the process cannot hold are
// refused first, naming the manifest.
Status CheckDenseSizes(const std::string& dir, const CheckpointManifest& m) {
  const std::string manifest = CheckpointJoinPath(dir, kManifestName);
  TETHER_RETURN_IF_ERROR(CheckManifestSizes(manifest, m));
  uint64_t dense_bytes = 0;
  for (const TableSpec& t : m.tables())
    if (IsDenseTable(t)) dense_bytes += t.size() * sizeof(float);
  const MemoryBudget budget = MemoryBudgetFor(JobConfig{});
  if (budget.bytes > 0 && dense_bytes > budget.bytes)
    return Status::ResourceExhausted(manifest + ": its dense tables need " + FormatBytes(dense_bytes) + ", more than the " +
                                     FormatBytes(budget.bytes) + " this process may use (" + budget.source + ")");
  return Status::OK();
}

}  // namespace

StatusOr<TrainedModel> LoadTrainedModel(const std::string& path) {
  TETHER_ASSIGN_OR_RETURN(std::string dir, ResolveCheckpoint(path));
  TETHER_ASSIGN_OR_RETURN(CheckpointManifest m, ReadManifest(dir));
  TrainedModel model;
  model.config = m.config();
  model.job_id = m.job_id();
  model.generation = m.generation();
  model.clock = m.clock();
  TETHER_RETURN_IF_ERROR(CheckDenseSizes(dir, m));
  std::vector<std::vector<std::pair<uint64_t, size_t>>> order(m.tables_size());
  model.tables.resize(m.tables_size());
  for (int i = 0; i < m.tables_size(); ++i) {
    model.tables[i].spec = m.tables(i);
    if (IsDenseTable(m.tables(i))) model.tables[i].values.assign(m.tables(i).size(), 0.0f);
  }
  for (int s = 0; s < m.num_servers(); ++s) {
    auto row = [&](int i, const ShardCheckpointHeader::Table&, uint64_t key, const float* v) -> Status {
      TrainedTable& t = model.tables[i];
      const uint32_t dim = t.spec.dim();
      order[i].emplace_back(key, t.keys.size());
      t.keys.push_back(key);
      t.values.insert(t.values.end(), v, v + dim);
      return Status::OK();
    };
    auto dense = [&](int i, const ShardCheckpointHeader::Table& t, const float* v) -> Status {
      std::copy(v, v + (t.dense_end() - t.dense_begin()), model.tables[i].values.begin() + t.dense_begin());
      return Status::OK();
    };
    TETHER_RETURN_IF_ERROR(ReadShardFile(dir, m, s, row, dense));
  }
  // Rows sorted by key, as TrainedTable promises.
  for (int i = 0; i < m.tables_size(); ++i) {
    TrainedTable& t = model.tables[i];
    if (IsDenseTable(t.spec)) continue;
    auto& o = order[i];
    std::sort(o.begin(), o.end());
    const uint32_t dim = t.spec.dim();
    std::vector<uint64_t> keys(o.size());
    std::vector<float> values(o.size() * size_t{dim});
    for (size_t k = 0; k < o.size(); ++k) {
      keys[k] = o[k].first;
      std::memcpy(values.data() + k * dim, t.values.data() + o[k].second * dim, dim * sizeof(float));
    }
    t.keys = std::move(keys);
    t.values = std::move(values);
  }
  return model;
}

}  // namespace tether
