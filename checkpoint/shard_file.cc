#include "checkpoint/shard_file.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "checkpoint/checked_file.h"
#include "checkpoint/checkpoint.h"
#include "core/table_spec.h"

namespace tether {

using checkpoint_internal::CheckedReader;
using checkpoint_internal::CheckedWriter;
using checkpoint_internal::FindFile;
using checkpoint_internal::kChunkBytes;

namespace {

constexpr char kShardMagic[8] = {'T', 'T', 'H', 'R', 'C', 'K', 'P', 'T'};

}  // namespace

Status WriteShardFile(FileSystem* fs, const std::string& ckpt_dir, int shard, int num_shards, int64_t clock,
                      const std::vector<ShardFileTable>& tables, CheckpointFile* written) {
  TETHER_RETURN_IF_ERROR(fs->CreateDirs(ckpt_dir));
  const std::string name = ShardFileName(shard);
  ShardCheckpointHeader header;
  header.set_format_version(kCheckpointFormatVersion);
  header.set_shard(shard);
  header.set_num_shards(num_shards);
  header.set_clock(clock);
  for (const ShardFileTable& t : tables) {
    ShardCheckpointHeader::Table* h = header.add_tables();
    h->set_id(t.spec->id());
    h->set_name(t.spec->name());
    h->set_version(t.version);
    h->set_optimizer(t.spec->optimizer().type());
    h->set_stride(t.stride);
    if (IsDenseTable(*t.spec)) {
      h->set_dense_begin(t.dense_begin);
      h->set_dense_end(t.dense_end);
      h->set_state_floats(t.floats - (t.dense_end - t.dense_begin));
    } else {
      h->set_rows(t.keys.size());
    }
  }
  const std::string head = header.SerializeAsString();
  const uint32_t len = static_cast<uint32_t>(head.size());
  const uint8_t len_le[4] = {static_cast<uint8_t>(len), static_cast<uint8_t>(len >> 8),
                             static_cast<uint8_t>(len >> 16), static_cast<uint8_t>(len >> 24)};
  const std::string path = CheckpointJoinPath(ckpt_dir, name);
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, fs->NewAtomicFile(path));
  CheckedWriter w(f.get());
  TETHER_RETURN_IF_ERROR(w.Append(kShardMagic, sizeof(kShardMagic)));
  TETHER_RETURN_IF_ERROR(w.Append(len_le, sizeof(len_le)));
  TETHER_RETURN_IF_ERROR(w.Append(head.data(), head.size()));
  for (const ShardFileTable& t : tables) {
    if (IsRowTable(*t.spec)) TETHER_RETURN_IF_ERROR(w.Append(t.keys.data(), t.keys.size() * sizeof(uint64_t)));
    TETHER_RETURN_IF_ERROR(w.Append(t.data, t.floats * sizeof(float)));
  }
  TETHER_RETURN_IF_ERROR(f->Commit());
  written->set_name(name);
  written->set_bytes(w.bytes());
  written->set_xxh3(w.checksum());
  return Status::OK();
}

Status ReadShardFile(const std::string& ckpt_dir, const CheckpointManifest& manifest, int old_shard,
                     const ShardRowFn& row, const ShardDenseFn& dense) {
  const std::string name = ShardFileName(old_shard);
  const CheckpointFile* expected = FindFile(manifest, name);
  const std::string path = CheckpointJoinPath(ckpt_dir, name);
  if (expected == nullptr) return Status::DataLoss(CheckpointJoinPath(ckpt_dir, kManifestName) + ": lists no " + name);
  CheckedReader r(path, *expected);
  TETHER_RETURN_IF_ERROR(r.Open());
  char magic[8];
  uint8_t len_le[4];
  TETHER_RETURN_IF_ERROR(r.Read(magic, sizeof(magic), "the magic number"));
  if (std::memcmp(magic, kShardMagic, sizeof(magic)) != 0)
    return Status::DataLoss(path + ": not a Tether shard checkpoint (bad magic number)");
  TETHER_RETURN_IF_ERROR(r.Read(len_le, sizeof(len_le), "the header length"));
  const uint32_t len = len_le[0] | (uint32_t{len_le[1]} << 8) | (uint32_t{len_le[2]} << 16) | (uint32_t{len_le[3]} << 24);
  if (len > expected->bytes()) return Status::DataLoss(path + ": header length " + std::to_string(len) + " past the file");
  std::string head(len, '\0');
  TETHER_RETURN_IF_ERROR(r.Read(head.data(), len, "the header"));
  ShardCheckpointHeader h;
  if (!h.ParseFromString(head)) return Status::DataLoss(path + ": unreadable header");
  if (h.shard() != old_shard || h.num_shards() != manifest.num_servers() || h.clock() != manifest.clock() ||
      h.tables_size() != manifest.tables_size())
    return Status::DataLoss(path + ": header says shard " + std::to_string(h.shard()) + " of " +
                            std::to_string(h.num_shards()) + " at clock " + std::to_string(h.clock()) +
                            ", the manifest shard " + std::to_string(old_shard) + " of " +
                            std::to_string(manifest.num_servers()) + " at clock " + std::to_string(manifest.clock()));
  std::vector<uint64_t> keys;
  std::vector<float> values;
  for (int i = 0; i < h.tables_size(); ++i) {
    const ShardCheckpointHeader::Table& t = h.tables(i);
    const TableSpec& spec = manifest.tables(i);
    if (t.name() != spec.name()) return Status::DataLoss(path + ": table " + std::to_string(i) + " is " + t.name());
    if (IsDenseTable(spec)) {
      const uint64_t n = t.dense_end() - t.dense_begin();
      if (t.dense_end() < t.dense_begin() || t.dense_end() > spec.size() || n + t.state_floats() > expected->bytes())
        return Status::DataLoss(path + ": bad slice of dense table " + spec.name());
      values.resize(n + t.state_floats());
      TETHER_RETURN_IF_ERROR(r.Read(values.data(), values.size() * sizeof(float), "a dense slice"));
      TETHER_RETURN_IF_ERROR(dense(i, t, values.data()));
      continue;
    }
    if (t.stride() < spec.dim() || t.rows() > expected->bytes() / 8)
      return Status::DataLoss(path + ": bad row count or stride for table " + spec.name());
    keys.resize(t.rows());
    TETHER_RETURN_IF_ERROR(r.Read(keys.data(), keys.size() * sizeof(uint64_t), "the keys"));
    const uint64_t chunk_rows = std::max<uint64_t>(1, kChunkBytes / (sizeof(float) * t.stride()));
    for (uint64_t b = 0; b < t.rows(); b += chunk_rows) {
      const uint64_t e = std::min<uint64_t>(t.rows(), b + chunk_rows);
      values.resize((e - b) * t.stride());
      TETHER_RETURN_IF_ERROR(r.Read(values.data(), values.size() * sizeof(float), "the rows"));
      for (uint64_t k = b; k < e; ++k) TETHER_RETURN_IF_ERROR(row(i, t, keys[k], values.data() + (k - b) * t.stride()));
    }
  }
  TETHER_RETURN_IF_ERROR(r.Finish());
  return r.Check();
}

}  // namespace tether
