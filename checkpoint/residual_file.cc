#include "checkpoint/residual_file.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "checkpoint/checkpoint.h"
#include "core/table_spec.h"
#include "core/wire_codec.h"

namespace tether {
namespace {

constexpr char kMagic[8] = {'T', 'T', 'H', 'R', 'R', 'E', 'S', 'D'};
constexpr uint32_t kMaxNameBytes = 4096;

template <typename T>
void Put(std::string* out, const T& v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

// Reads the file's bytes in order; every error names the file and where.
class Parser {
 public:
  Parser(const std::string& path, const std::string& bytes) : path_(path), bytes_(bytes) {}

  size_t left() const { return bytes_.size() - pos_; }
  size_t pos() const { return pos_; }

  Status Take(void* out, size_t n, const std::string& what) {
    if (n > left())
      return Status::DataLoss(path_ + ": " + what + " needs " + std::to_string(n) + " bytes at byte " +
                              std::to_string(pos_) + ", but the file ends " + std::to_string(left()) +
                              " bytes later (not a residual file, or a damaged one)");
    if (n > 0) std::memcpy(out, bytes_.data() + pos_, n);
    pos_ += n;
    return Status::OK();
  }
  template <typename T>
  Status Get(T* v, const std::string& what) {
    return Take(v, sizeof(T), what);
  }
  Status Error(const std::string& what) const { return Status::DataLoss(path_ + ": " + what); }

 private:
  const std::string& path_;
  const std::string& bytes_;
  size_t pos_ = 0;
};

Status ParseTable(Parser* p, ResidualTable* t) {
  uint32_t name_bytes = 0;
  TETHER_RETURN_IF_ERROR(p->Get(&name_bytes, "a table's name length"));
  if (name_bytes == 0 || name_bytes > kMaxNameBytes)
    return p->Error("a table name of " + std::to_string(name_bytes) + " bytes at byte " + std::to_string(p->pos()) +
                    " (1 to " + std::to_string(kMaxNameBytes) + " allowed)");
  t->table.resize(name_bytes);
  TETHER_RETURN_IF_ERROR(p->Take(t->table.data(), name_bytes, "a table's name"));
  const std::string who = "table '" + t->table + "'";
  uint8_t dense = 0;
  uint64_t count = 0;
  TETHER_RETURN_IF_ERROR(p->Get(&dense, who + "'s kind"));
  TETHER_RETURN_IF_ERROR(p->Get(&t->dim, who + "'s dim"));
  TETHER_RETURN_IF_ERROR(p->Get(&count, who + "'s count"));
  TETHER_RETURN_IF_ERROR(p->Get(&t->evicted, who + "'s evicted rows"));
  TETHER_RETURN_IF_ERROR(p->Get(&t->evicted_l1, who + "'s evicted sum"));
  if (dense > 1) return p->Error(who + ": kind byte " + std::to_string(dense) + " (0 row, 1 dense)");
  t->dense = dense == 1;
  if (t->dense != (t->dim == 0))
    return p->Error(who + ": a " + (t->dense ? "dense" : "row") + " table with dim " + std::to_string(t->dim));
  // Sizes are checked against the bytes left before anything is allocated.
  const uint64_t per = t->dense ? sizeof(float) : sizeof(uint64_t) + uint64_t{t->dim} * sizeof(float);
  if (count > p->left() / per)
    return p->Error(who + ": " + std::to_string(count) + (t->dense ? " floats" : " rows") + " of " +
                    std::to_string(per) + " bytes, but " + std::to_string(p->left()) + " bytes are left");
  if (!t->dense) {
    t->keys.resize(count);
    TETHER_RETURN_IF_ERROR(p->Take(t->keys.data(), count * sizeof(uint64_t), who + "'s keys"));
  }
  t->values.resize(t->dense ? count : count * t->dim);
  return p->Take(t->values.data(), t->values.size() * sizeof(float), who + "'s values");
}

}  // namespace

std::string ResidualFileName(int rank) { return "worker-" + std::to_string(rank) + ".residuals"; }

Status WriteResidualFile(FileSystem* fs, const std::string& ckpt_dir, int rank,
                         const std::vector<ResidualTable>& tables, CheckpointFile* written) {
  std::string bytes(kMagic, sizeof(kMagic));
  Put(&bytes, kResidualFormatVersion);
  Put(&bytes, static_cast<uint32_t>(tables.size()));
  for (const ResidualTable& t : tables) {
    const uint64_t count = t.dense ? t.values.size() : t.keys.size();
    if (t.table.empty() || t.table.size() > kMaxNameBytes || t.dense != (t.dim == 0) ||
        (!t.dense && t.values.size() != t.keys.size() * t.dim))
      return Status::InvalidArgument("residuals of table '" + t.table + "': " + std::to_string(t.keys.size()) +
                                     " keys, " + std::to_string(t.values.size()) + " values, dim " +
                                     std::to_string(t.dim) + " do not agree");
    Put(&bytes, static_cast<uint32_t>(t.table.size()));
    bytes += t.table;
    Put(&bytes, static_cast<uint8_t>(t.dense ? 1 : 0));
    Put(&bytes, t.dim);
    Put(&bytes, count);
    Put(&bytes, t.evicted);
    Put(&bytes, t.evicted_l1);
    bytes.append(reinterpret_cast<const char*>(t.keys.data()), t.keys.size() * sizeof(uint64_t));
    bytes.append(reinterpret_cast<const char*>(t.values.data()), t.values.size() * sizeof(float));
  }
  return WriteListedFile(fs, ckpt_dir, ResidualFileName(rank), bytes, written);
}

StatusOr<std::vector<ResidualTable>> ReadResidualFile(const std::string& ckpt_dir, const CheckpointFile& expected) {
  const std::string path = CheckpointJoinPath(ckpt_dir, expected.name());
  TETHER_ASSIGN_OR_RETURN(const std::string bytes, ReadListedFile(ckpt_dir, expected, FileLister::kWorkerState));
  Parser p(path, bytes);
  char magic[sizeof(kMagic)];
  uint32_t version = 0, n = 0;
  TETHER_RETURN_IF_ERROR(p.Take(magic, sizeof(magic), "the header"));
  if (std::memcmp(magic, kMagic, sizeof(kMagic)) != 0) return p.Error("not a residual file (no TTHRRESD header)");
  TETHER_RETURN_IF_ERROR(p.Get(&version, "the format version"));
  if (version != kResidualFormatVersion)
    return p.Error("format version " + std::to_string(version) + "; this build reads version " +
                   std::to_string(kResidualFormatVersion));
  TETHER_RETURN_IF_ERROR(p.Get(&n, "the number of tables"));
  std::vector<ResidualTable> tables;
  std::set<std::string> seen;
  for (uint32_t i = 0; i < n; ++i) {
    ResidualTable t;
    TETHER_RETURN_IF_ERROR(ParseTable(&p, &t));
    if (!seen.insert(t.table).second) return p.Error("table '" + t.table + "' appears twice");
    tables.push_back(std::move(t));
  }
  if (p.left() != 0)
    return p.Error(std::to_string(p.left()) + " bytes after the last of its " + std::to_string(n) + " tables");
  return tables;
}

std::string DiffResidualTables(const std::vector<ResidualTable>& residuals, const std::vector<TableSpec>& tables,
                               const std::string& path) {
  for (const ResidualTable& r : residuals) {
    const TableSpec* spec = nullptr;
    for (const TableSpec& t : tables)
      if (t.name() == r.table) spec = &t;
    const std::string who = path + ": residuals of table '" + r.table + "'";
    if (spec == nullptr) {
      std::string names;
      for (const TableSpec& t : tables) names += (names.empty() ? "" : ", ") + t.name();
      return who + ", which the job does not have (its tables: " + names + ")";
    }
    if (IsDenseTable(*spec) != r.dense)
      return who + ": a " + (r.dense ? "dense" : "row") + " table's, but the job's table is " +
             (IsDenseTable(*spec) ? "dense" : "a row table");
    if (r.dense && r.values.size() != spec->size())
      return who + ": " + std::to_string(r.values.size()) + " floats, but the table has " +
             std::to_string(spec->size());
    if (!r.dense && r.dim != spec->dim())
      return who + ": rows of " + std::to_string(r.dim) + " floats, but the table's dim is " +
             std::to_string(spec->dim());
    if (!r.dense && spec->num_keys() > 0)
      for (uint64_t k : r.keys)
        if (k >= spec->num_keys())
          return who + ": key " + std::to_string(k) + " is past the table's num_keys " +
                 std::to_string(spec->num_keys());
  }
  return "";
}

std::string DescribeResidualRestore(const std::string& file, const std::vector<ResidualTable>& residuals,
                                    const std::vector<std::string>& skipped, const std::vector<TableSpec>& tables) {
  size_t restored_tables = 0;
  uint64_t restored_rows = 0;
  std::string not_restored;
  for (const ResidualTable& r : residuals) {
    const uint64_t rows = r.dense ? 0 : r.keys.size();
    if (std::find(skipped.begin(), skipped.end(), r.table) == skipped.end()) {
      ++restored_tables;
      restored_rows += rows;
      continue;
    }
    std::string why = "error feedback off";
    for (const TableSpec& t : tables)
      if (t.name() == r.table && !IsHalfWire(t.push_wire()))
        why = std::string("pushed in ") + WireEncodingName(t.push_wire()) + " now";
    not_restored += (not_restored.empty() ? "table " : ", table ") + r.table + " (" +
                    (r.dense ? "dense" : std::to_string(rows) + " rows") + ": " + why + ")";
  }
  if (restored_tables == 0) return "error-feedback residuals in " + file + " not restored: " + not_restored;
  std::string line = "error-feedback residuals restored from " + file + ": " + std::to_string(restored_tables) +
                     " table(s), " + std::to_string(restored_rows) + " row(s)";
  if (!not_restored.empty()) line += "; not restored: " + not_restored;
  return line;
}

}  // namespace tether
