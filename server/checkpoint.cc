#include "server/checkpoint.h"

#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <google/protobuf/text_format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/partition.h"
#include "core/table_spec.h"
#include "optim/optimizer.h"

namespace tether {

std::string ChecksumHex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

std::string CheckpointJoinPath(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

namespace {

constexpr char kShardMagic[8] = {'T', 'T', 'H', 'R', 'C', 'K', 'P', 'T'};
constexpr size_t kChunkBytes = size_t{8} << 20;

// XXH3-64 (xxHash) over a stream: a checksum at memory speed (tens of GB/s
// with SSE2/AVX2), so checking a checkpoint costs little beside its I/O;
// zlib's CRC-32 ran at a fraction of the disk's write speed.
class Checksum {
 public:
  Checksum() : state_(XXH3_createState()) { XXH3_64bits_reset(state_); }
  ~Checksum() { XXH3_freeState(state_); }
  Checksum(const Checksum&) = delete;
  Checksum& operator=(const Checksum&) = delete;
  void Update(const void* p, size_t n) { XXH3_64bits_update(state_, p, n); }
  uint64_t Digest() const { return XXH3_64bits_digest(state_); }

 private:
  XXH3_state_t* state_;
};

uint64_t ChecksumOf(const void* p, size_t n) { return XXH3_64bits(p, n); }

// Appends through a WritableFile in large pieces, keeping size and CRC.
class CheckedWriter {
 public:
  explicit CheckedWriter(WritableFile* f) : f_(f) {}
  Status Append(const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      const size_t step = std::min(n, kChunkBytes);
      TETHER_RETURN_IF_ERROR(f_->Append(std::string_view(c, step)));
      sum_.Update(c, step);
      bytes_ += step;
      c += step;
      n -= step;
    }
    return Status::OK();
  }
  uint64_t bytes() const { return bytes_; }
  uint64_t checksum() const { return sum_.Digest(); }

 private:
  WritableFile* f_;
  uint64_t bytes_ = 0;
  Checksum sum_;
};

// Reads a file in order, keeping size and CRC; errors name the file.
class CheckedReader {
 public:
  // `expected`: the file's manifest entry (name, bytes, xxh3); it must
  // outlive the reader.
  CheckedReader(std::string path, const CheckpointFile& expected)
      : path_(std::move(path)), expected_(expected), f_(std::fopen(path_.c_str(), "rb")) {}
  ~CheckedReader() {
    if (f_ != nullptr) std::fclose(f_);
  }
  // The file opens and its size on disk is the manifest's: a truncated (or
  // replaced) file is refused before a byte of it is parsed.
  Status Open() const {
    if (f_ == nullptr) return Status::NotFound(path_ + ": cannot open: " + std::strerror(errno));
    struct stat st;
    if (fstat(fileno(f_), &st) != 0) return Status::IOError(path_ + ": cannot stat: " + std::strerror(errno));
    if (static_cast<uint64_t>(st.st_size) != expected_.bytes()) return SizeMismatch(static_cast<uint64_t>(st.st_size));
    return Status::OK();
  }
  Status Read(void* p, size_t n, const char* what) {
    const size_t got = std::fread(p, 1, n, f_);
    if (got != n)
      return Status::DataLoss(path_ + ": truncated: the file ends inside " + what + " (at byte " +
                              std::to_string(bytes_ + got) + ", " + std::to_string(bytes_ + n) +
                              " expected); the manifest says the file has " + std::to_string(expected_.bytes()) +
                              " bytes");
    sum_.Update(p, n);
    bytes_ += n;
    return Status::OK();
  }
  // Reads to the end (the CRC covers the whole file).
  Status Finish() {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f_)) > 0) {
      sum_.Update(buf, n);
      bytes_ += n;
    }
    if (std::ferror(f_)) return Status::IOError(path_ + ": read error");
    return Status::OK();
  }
  // After Finish: the file against its manifest entry.
  Status Check() const {
    if (bytes_ != expected_.bytes()) return SizeMismatch(bytes_);
    if (sum_.Digest() != expected_.xxh3())
      return Status::DataLoss(path_ + ": checksum mismatch: XXH3-64 " + ChecksumHex(sum_.Digest()) + ", the manifest says " +
                              ChecksumHex(expected_.xxh3()) + " (the file is corrupt)");
    return Status::OK();
  }
  const std::string& path() const { return path_; }

 private:
  Status SizeMismatch(uint64_t on_disk) const {
    return Status::DataLoss(path_ + ": " + std::to_string(on_disk) + " bytes on disk, but the manifest says " +
                            std::to_string(expected_.bytes()) + " (a truncated or replaced file)");
  }

  std::string path_;
  const CheckpointFile& expected_;
  FILE* f_;
  uint64_t bytes_ = 0;
  Checksum sum_;
};

const CheckpointFile* FindFile(const CheckpointManifest& m, const std::string& name) {
  for (const CheckpointFile& f : m.files())
    if (f.name() == name) return &f;
  return nullptr;
}

Status WriteSmallFile(FileSystem* fs, const std::string& path, const std::string& bytes, CheckpointFile* written,
                      const std::string& name) {
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, fs->NewAtomicFile(path));
  CheckedWriter w(f.get());
  TETHER_RETURN_IF_ERROR(w.Append(bytes.data(), bytes.size()));
  TETHER_RETURN_IF_ERROR(f->Commit());
  if (written != nullptr) {
    written->set_name(name);
    written->set_bytes(w.bytes());
    written->set_xxh3(w.checksum());
  }
  return Status::OK();
}

// Parses "ckpt-<clock>[-final][-r<N>]"; false for anything else.
bool ParseCheckpointName(const std::string& name, int64_t* clock, bool* final, int* attempt) {
  if (name.rfind("ckpt-", 0) != 0) return false;
  std::string rest = name.substr(5);
  *final = false;
  *attempt = 0;
  // "-r<N>": the N-th checkpoint of this clock (FreeCheckpointDir).
  if (const size_t r = rest.rfind("-r"); r != std::string::npos && r + 2 < rest.size() && rest.size() - r - 2 <= 6 &&
                                         rest.find_first_not_of("0123456789", r + 2) == std::string::npos) {
    *attempt = std::stoi(rest.substr(r + 2));
    if (*attempt < 1) return false;
    rest.resize(r);
  }
  if (rest.size() > 6 && rest.compare(rest.size() - 6, 6, "-final") == 0) {
    *final = true;
    rest.resize(rest.size() - 6);
  }
  if (rest.empty() || rest.find_first_not_of("0123456789") != std::string::npos) return false;
  *clock = std::stoll(rest);
  return true;
}

struct Found {
  int64_t clock;
  bool final;
  int attempt;
  std::string path;
  bool complete;
};

std::vector<Found> ListCheckpoints(const std::string& parent) {
  std::vector<Found> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(parent, ec)) {
    if (!e.is_directory(ec)) continue;
    Found f;
    if (!ParseCheckpointName(e.path().filename().string(), &f.clock, &f.final, &f.attempt)) continue;
    f.path = e.path().string();
    f.complete = std::filesystem::exists(CheckpointJoinPath(f.path, kManifestName), ec);
    out.push_back(f);
  }
  std::sort(out.begin(), out.end(),
            [](const Found& a, const Found& b) {
              return std::tie(a.clock, a.final, a.attempt) < std::tie(b.clock, b.final, b.attempt);
            });
  return out;
}

}  // namespace

std::string CheckpointDirName(int64_t clock, bool final) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "ckpt-%012" PRId64 "%s", clock, final ? "-final" : "");
  return buf;
}

Status CheckCheckpointDir(const std::string& dir) {
  const std::string what = "checkpoint.dir (--checkpoint_dir) " + dir + ": ";
  // The nearest part of the path that exists must be a directory this
  // process may write (the rest is created at the first checkpoint).
  std::string at = dir;
  for (;;) {
    struct stat st;
    if (::stat(at.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        return Status::InvalidArgument(what + (at == dir ? std::string("is a file, not a directory")
                                                          : at + " is a file, not a directory, so it cannot be "
                                                                 "created"));
      if (::access(at.c_str(), W_OK | X_OK) != 0)
        return Status::InvalidArgument(what + (at == dir ? "cannot write there" : "cannot be created in " + at) + ": " +
                                       std::strerror(errno));
      return Status::OK();
    }
    if (errno != ENOENT && errno != ENOTDIR)
      return Status::InvalidArgument(what + "cannot check " + at + ": " + std::strerror(errno));
    std::string parent = std::filesystem::path(at).parent_path().string();
    if (parent.empty()) parent = ".";
    if (parent == at) return Status::InvalidArgument(what + "no part of the path exists");
    at = parent;
  }
}

Status CheckCheckpointPaths(const std::string& dir, const std::string& resume_from) {
  if (!dir.empty()) TETHER_RETURN_IF_ERROR(CheckCheckpointDir(dir));
  if (!resume_from.empty()) {
    StatusOr<std::string> found = ResolveCheckpoint(resume_from);
    if (!found.ok()) return Status::InvalidArgument("--resume_from=" + resume_from + ": " + found.status().message());
  }
  return Status::OK();
}

std::string FreeCheckpointDir(const std::string& parent, int64_t clock, bool final) {
  const std::string base = CheckpointJoinPath(parent, CheckpointDirName(clock, final));
  std::string dir = base;
  std::error_code ec;
  for (int attempt = 1; std::filesystem::exists(CheckpointJoinPath(dir, kManifestName), ec); ++attempt)
    dir = base + "-r" + std::to_string(attempt);
  return dir;
}

std::string AbsoluteCheckpointPath(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  std::string abs = std::filesystem::absolute(path, ec).lexically_normal().string();
  if (ec) return path;
  while (abs.size() > 1 && abs.back() == '/') abs.pop_back();
  return abs;
}

std::string ShardFileName(int shard) { return "shard-" + std::to_string(shard) + ".tables"; }
std::string WorkerFileName(int rank) { return "worker-" + std::to_string(rank) + ".state"; }

Status WriteShardCheckpoint(FileSystem* fs, const std::string& ckpt_dir, int shard, int num_shards, int64_t clock,
                            const std::vector<std::unique_ptr<ServerTable>>& tables, CheckpointFile* written) {
  TETHER_RETURN_IF_ERROR(fs->CreateDirs(ckpt_dir));
  const std::string name = ShardFileName(shard);
  ShardCheckpointHeader header;
  header.set_format_version(kCheckpointFormatVersion);
  header.set_shard(shard);
  header.set_num_shards(num_shards);
  header.set_clock(clock);
  std::vector<std::vector<uint64_t>> keys(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    const ServerTable& t = *tables[i];
    ShardCheckpointHeader::Table* h = header.add_tables();
    h->set_id(t.spec().id());
    h->set_name(t.spec().name());
    h->set_version(t.version());
    h->set_optimizer(t.spec().optimizer().type());
    h->set_stride(t.stride());
    if (IsDenseTable(t.spec())) {
      h->set_dense_begin(t.dense_begin());
      h->set_dense_end(t.dense_end());
      h->set_state_floats(t.raw_floats() - (t.dense_end() - t.dense_begin()));
    } else {
      keys[i] = t.KeysByRow();
      h->set_rows(keys[i].size());
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
  for (size_t i = 0; i < tables.size(); ++i) {
    const ServerTable& t = *tables[i];
    if (IsRowTable(t.spec())) TETHER_RETURN_IF_ERROR(w.Append(keys[i].data(), keys[i].size() * sizeof(uint64_t)));
    TETHER_RETURN_IF_ERROR(w.Append(t.raw_data(), t.raw_floats() * sizeof(float)));
  }
  TETHER_RETURN_IF_ERROR(f->Commit());
  written->set_name(name);
  written->set_bytes(w.bytes());
  written->set_xxh3(w.checksum());
  return Status::OK();
}

Status WriteWorkerState(FileSystem* fs, const std::string& ckpt_dir, const WorkerState& state,
                        CheckpointFile* written) {
  TETHER_RETURN_IF_ERROR(fs->CreateDirs(ckpt_dir));
  const std::string name = WorkerFileName(state.rank());
  return WriteSmallFile(fs, CheckpointJoinPath(ckpt_dir, name), state.SerializeAsString(), written, name);
}

Status CopyCheckpointFile(FileSystem* fs, const std::string& from_dir, const std::string& to_dir,
                          const CheckpointFile& file) {
  CheckedReader r(CheckpointJoinPath(from_dir, file.name()), file);
  TETHER_RETURN_IF_ERROR(r.Open());
  std::string bytes(file.bytes(), '\0');
  TETHER_RETURN_IF_ERROR(r.Read(bytes.data(), bytes.size(), "the file"));
  TETHER_RETURN_IF_ERROR(r.Finish());
  TETHER_RETURN_IF_ERROR(r.Check());
  TETHER_RETURN_IF_ERROR(fs->CreateDirs(to_dir));
  return WriteSmallFile(fs, CheckpointJoinPath(to_dir, file.name()), bytes, nullptr, file.name());
}

int ManifestWriterRank(const std::vector<CheckpointWorker>& workers) {
  int writer = -1;
  for (const CheckpointWorker& w : workers)
    if (w.kind() == CheckpointWorker::TRAINING && (writer < 0 || w.rank() < writer)) writer = w.rank();
  return writer;
}

Status WriteManifest(FileSystem* fs, const std::string& ckpt_dir, const CheckpointManifest& manifest) {
  // Across hosts without a shared file system the directory may hold only
  // the files the servers wrote elsewhere: nothing yet on this host.
  TETHER_RETURN_IF_ERROR(fs->CreateDirs(ckpt_dir));
  std::string text;
  if (!google::protobuf::TextFormat::PrintToString(manifest, &text))
    return Status::Internal("cannot print the checkpoint manifest");
  text = "# Tether checkpoint manifest (server/checkpoint.h); the last line checks the rest.\n" + text;
  text += "# xxh3 " + ChecksumHex(ChecksumOf(text.data(), text.size())) + "\n";
  return WriteSmallFile(fs, CheckpointJoinPath(ckpt_dir, kManifestName), text, nullptr, kManifestName);
}

StatusOr<CheckpointManifest> ReadManifest(const std::string& ckpt_dir) {
  const std::string path = CheckpointJoinPath(ckpt_dir, kManifestName);
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(ckpt_dir + " is not a checkpoint: it has no " + kManifestName);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const size_t trailer = text.rfind("# xxh3 ");
  if (trailer == std::string::npos || text.size() < trailer + 7 + 16)
    return Status::DataLoss(path + ": no checksum line (\"# xxh3 ...\") at the end: truncated or edited");
  const std::string want = text.substr(trailer + 7, 16);
  const std::string have = ChecksumHex(ChecksumOf(text.data(), trailer));
  if (want != have)
    return Status::DataLoss(path + ": checksum mismatch: XXH3-64 " + have + " of its contents, the file says " + want +
                            " (the manifest is corrupt or was edited)");
  CheckpointManifest m;
  if (!google::protobuf::TextFormat::ParseFromString(text.substr(0, trailer), &m))
    return Status::DataLoss(path + ": not a checkpoint manifest (text format)");
  if (m.format_version() != kCheckpointFormatVersion)
    return Status::FailedPrecondition(path + ": checkpoint format version " + std::to_string(m.format_version()) +
                                      "; this build reads version " + std::to_string(kCheckpointFormatVersion));
  return m;
}

namespace {

// The latest complete checkpoint under `dir` ("" when none).
std::string LatestComplete(const std::string& dir) {
  const std::vector<Found> all = ListCheckpoints(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if (it->complete) return it->path;
  return "";
}

// Why `path`, which exists but is no directory, is not a checkpoint, and
// which directory to give instead: its own directory when that is a
// checkpoint (a shard file, the MANIFEST) or holds complete ones.
std::string NotADirectory(const std::string& path, const std::filesystem::file_status& st) {
  std::string msg = path + ": is " + (std::filesystem::is_regular_file(st) ? "a file" : "not a directory") +
                    ", not a checkpoint directory";
  std::string parent = std::filesystem::path(path).parent_path().string();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  if (std::filesystem::exists(CheckpointJoinPath(parent, kManifestName), ec))
    return msg + "; give the checkpoint directory that holds it: " + parent;
  const std::string latest = LatestComplete(parent);
  if (!latest.empty())
    return msg + "; give a checkpoint directory (one holding a " + kManifestName +
           ") or a directory of them, such as " + parent + " (its latest complete checkpoint is " + latest + ")";
  return msg + "; give a checkpoint directory (one holding a " + kManifestName + ") or a directory of them";
}

}  // namespace

StatusOr<std::string> ResolveCheckpoint(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st)) return Status::NotFound(path + ": no such checkpoint directory");
  if (!std::filesystem::is_directory(st)) return Status::InvalidArgument(NotADirectory(path, st));
  if (std::filesystem::exists(CheckpointJoinPath(path, kManifestName), ec)) return path;
  const std::vector<Found> all = ListCheckpoints(path);
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if (it->complete) return it->path;
  return Status::NotFound(path + ": holds no complete checkpoint (a ckpt-* directory with a " +
                          std::string(kManifestName) + ")" +
                          (all.empty() ? "" : "; " + std::to_string(all.size()) + " incomplete ones were left"));
}

Status VerifyCheckpointFiles(const std::string& ckpt_dir, const CheckpointManifest& manifest) {
  for (const CheckpointFile& f : manifest.files()) {
    CheckedReader r(CheckpointJoinPath(ckpt_dir, f.name()), f);
    TETHER_RETURN_IF_ERROR(r.Open());
    TETHER_RETURN_IF_ERROR(r.Finish());
    TETHER_RETURN_IF_ERROR(r.Check());
  }
  return Status::OK();
}

StatusOr<WorkerState> ReadWorkerState(const std::string& ckpt_dir, const CheckpointManifest& manifest, int rank) {
  const std::string name = WorkerFileName(rank);
  const CheckpointFile* f = FindFile(manifest, name);
  if (f == nullptr) return Status::NotFound(ckpt_dir + ": worker " + std::to_string(rank) + " has no state file");
  const std::string path = CheckpointJoinPath(ckpt_dir, name);
  CheckedReader r(path, *f);
  TETHER_RETURN_IF_ERROR(r.Open());
  std::string bytes(f->bytes(), '\0');
  TETHER_RETURN_IF_ERROR(r.Read(bytes.data(), bytes.size(), "the worker state"));
  TETHER_RETURN_IF_ERROR(r.Finish());
  TETHER_RETURN_IF_ERROR(r.Check());
  WorkerState s;
  if (!s.ParseFromString(bytes)) return Status::DataLoss(path + ": not a worker state");
  if (s.rank() != rank)
    return Status::DataLoss(path + ": holds the state of worker " + std::to_string(s.rank()) + ", not " +
                            std::to_string(rank));
  return s;
}

std::string DiffTableShapes(const google::protobuf::RepeatedPtrField<TableSpec>& checkpoint,
                            const google::protobuf::RepeatedPtrField<TableSpec>& job) {
  if (checkpoint.size() != job.size())
    return "the checkpoint has " + std::to_string(checkpoint.size()) + " tables, the job " + std::to_string(job.size());
  for (int i = 0; i < job.size(); ++i) {
    const TableSpec& a = checkpoint[i];
    const TableSpec& b = job[i];
    const std::string t = "table '" + a.name() + "'";
    auto differ = [&](const std::string& field, const std::string& x, const std::string& y) {
      return t + ", field " + field + ": the checkpoint has " + x + ", the job has " + y +
             " (a table's shape and optimizer type cannot change on resume)";
    };
    if (a.name() != b.name()) return differ("name", a.name(), b.name());
    if (a.id() != b.id()) return differ("id", std::to_string(a.id()), std::to_string(b.id()));
    if (a.kind() != b.kind())
      return differ("kind", TableSpec::Kind_Name(a.kind()), TableSpec::Kind_Name(b.kind()));
    if (IsRowTable(a) && a.dim() != b.dim()) return differ("dim", std::to_string(a.dim()), std::to_string(b.dim()));
    if (IsDenseTable(a) && a.size() != b.size())
      return differ("size", std::to_string(a.size()), std::to_string(b.size()));
    if (a.num_keys() != b.num_keys())
      return differ("num_keys", std::to_string(a.num_keys()), std::to_string(b.num_keys()));
    if (a.key_base() != b.key_base())
      return differ("key_base", std::to_string(a.key_base()), std::to_string(b.key_base()));
    if (a.optimizer().type() != b.optimizer().type())
      return differ("optimizer.type", OptimizerType_Name(a.optimizer().type()),
                    OptimizerType_Name(b.optimizer().type()));
    if (Optimizer(a.optimizer()).StatePerWeight() != Optimizer(b.optimizer()).StatePerWeight())
      return differ("optimizer.momentum", std::to_string(a.optimizer().momentum()),
                    std::to_string(b.optimizer().momentum()));
  }
  return "";
}

namespace {

// Reads one shard file; calls row(table index, key, values) for each row
// and dense(table index, begin, end, weights, state) for each dense slice.
template <typename RowFn, typename DenseFn>
Status ReadShardFile(const std::string& ckpt_dir, const CheckpointManifest& manifest, int old_shard, RowFn&& row,
                     DenseFn&& dense) {
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

}  // namespace

Status RestoreShardTables(const std::string& ckpt_dir, const CheckpointManifest& manifest, int shard, int num_shards,
                          std::vector<std::unique_ptr<ServerTable>>* tables) {
  if (static_cast<int>(tables->size()) != manifest.tables_size())
    return Status::FailedPrecondition(ckpt_dir + ": the checkpoint has " + std::to_string(manifest.tables_size()) +
                                      " tables, the job " + std::to_string(tables->size()));
  const bool same_sharding = num_shards == manifest.num_servers();
  for (int old = 0; old < manifest.num_servers(); ++old) {
    // Hash partitioning: with another number of shards, any old shard may
    // hold rows of this one. With the same, only its own file.
    if (same_sharding && old != shard) continue;
    std::vector<bool> reserved(tables->size(), false);
    auto row = [&](int i, const ShardCheckpointHeader::Table& t, uint64_t key, const float* v) -> Status {
      ServerTable& table = *(*tables)[i];
      if (!reserved[i]) {
        // One allocation per table and file, not a regrowth every doubling.
        reserved[i] = true;
        table.ReserveRows(table.num_rows() + (same_sharding ? t.rows() : t.rows() / num_shards + t.rows() / 16 + 64));
      }
      if (t.stride() != table.stride())
        return Status::DataLoss(ckpt_dir + "/" + ShardFileName(old) + ": table " + t.name() + " rows have " +
                                std::to_string(t.stride()) + " floats, the job's " + std::to_string(table.stride()));
      // Versions only mean something per shard: kept when the sharding is
      // (a table without rows was never pushed: its version is 0).
      if (same_sharding) table.set_version(t.version());
      if (!same_sharding && ShardForKey(key, num_shards) != shard) return Status::OK();
      return table.RestoreRow(key, v);
    };
    auto dense = [&](int i, const ShardCheckpointHeader::Table& t, const float* v) -> Status {
      ServerTable& table = *(*tables)[i];
      if (same_sharding) table.set_version(t.version());
      const uint64_t ob = t.dense_begin(), oe = t.dense_end(), on = oe - ob;
      const uint64_t nb = table.dense_begin(), ne = table.dense_end(), nn = ne - nb;
      const uint64_t lo = std::max(ob, nb), hi = std::min(oe, ne);
      float* out = table.mutable_raw_data();
      const Optimizer opt(table.spec().optimizer());
      const uint64_t state_per_weight = static_cast<uint64_t>(opt.StatePerWeight());
      const uint64_t extra = opt.StateFloats(1) - state_per_weight;  // Adam's step count
      if (t.state_floats() != on * state_per_weight + extra || table.raw_floats() != nn + opt.StateFloats(nn))
        return Status::DataLoss(ckpt_dir + "/" + ShardFileName(old) + ": dense table " + t.name() +
                                " has another optimizer state layout than the job's");
      for (uint64_t j = lo; j < hi; ++j) {
        out[j - nb] = v[j - ob];
        for (uint64_t s = 0; s < state_per_weight; ++s) out[nn + s * nn + (j - nb)] = v[on + s * on + (j - ob)];
      }
      // Adam's step count of the slice (one float after the moments), from
      // the old slice that holds the new one's first index.
      if (extra == 1 && lo < hi && lo == nb) out[nn + state_per_weight * nn] = v[on + state_per_weight * on];
      return Status::OK();
    };
    TETHER_RETURN_IF_ERROR(ReadShardFile(ckpt_dir, manifest, old, row, dense));
  }
  return Status::OK();
}

StatusOr<TrainedModel> LoadTrainedModel(const std::string& path) {
  TETHER_ASSIGN_OR_RETURN(std::string dir, ResolveCheckpoint(path));
  TETHER_ASSIGN_OR_RETURN(CheckpointManifest m, ReadManifest(dir));
  TrainedModel model;
  model.config = m.config();
  model.job_id = m.job_id();
  model.generation = m.generation();
  model.clock = m.clock();
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

Status PruneCheckpoints(FileSystem* fs, const std::string& parent, int keep_last) {
  const std::vector<Found> all = ListCheckpoints(parent);
  int complete_seen = 0;
  bool newer_complete = false;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (it->complete) {
      ++complete_seen;
      if (complete_seen > std::max(1, keep_last)) TETHER_RETURN_IF_ERROR(fs->RemoveAll(it->path));
      newer_complete = true;
    } else if (newer_complete) {
      TETHER_RETURN_IF_ERROR(fs->RemoveAll(it->path));  // an abandoned, older attempt
    }
  }
  return Status::OK();
}

}  // namespace tether
