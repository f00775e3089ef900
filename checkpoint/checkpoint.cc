#include "checkpoint/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include <glog/logging.h>
#include <google/protobuf/text_format.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/checked_file.h"
#include "checkpoint/dir_lock.h"
#include "core/output_path.h"
#include "core/regular_file.h"
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

using checkpoint_internal::CheckedReader;
using checkpoint_internal::ChecksumOf;
using checkpoint_internal::FindFile;
using checkpoint_internal::WriteSmallFile;

namespace {

// Digits only, at most `max_digits` of them, as a non-negative int64.
bool ParseDigits(const std::string& s, size_t max_digits, int64_t* out) {
  if (s.empty() || s.size() > max_digits || s.find_first_not_of("0123456789") != std::string::npos) return false;
  int64_t v = 0;
  for (char c : s) {
    if (v > (std::numeric_limits<int64_t>::max() - (c - '0')) / 10) return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// Parses the names CheckpointDirName and FreeCheckpointDir write,
// "ckpt-<clock: 12 to 19 digits>[-final][-r<N: 1 to 6 digits>]"; false for
// anything else, such as a clock past int64 ("ckpt-99999999999999999999"),
// which a person or another tool may have made.
bool ParseCheckpointName(const std::string& name, int64_t* clock, bool* final, int* attempt) {
  if (name.rfind("ckpt-", 0) != 0) return false;
  std::string rest = name.substr(5);
  *final = false;
  *attempt = 0;
  // "-r<N>": the N-th checkpoint of this clock (FreeCheckpointDir).
  if (const size_t r = rest.rfind("-r"); r != std::string::npos) {
    int64_t n = 0;
    if (!ParseDigits(rest.substr(r + 2), 6, &n) || n < 1) return false;
    *attempt = static_cast<int>(n);
    rest.resize(r);
  }
  if (rest.size() > 6 && rest.compare(rest.size() - 6, 6, "-final") == 0) {
    *final = true;
    rest.resize(rest.size() - 6);
  }
  return rest.size() >= 12 && ParseDigits(rest, 19, clock);
}

struct Found {
  int64_t clock;
  bool final;
  int attempt;
  std::string path;
  bool complete;
};

// Says once per process and folder which of its entries Tether did not
// write (they are left alone, never read, never pruned).
void WarnForeignEntries(const std::string& parent, const std::vector<std::string>& names) {
  if (names.empty()) return;
  static std::mutex mu;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!warned.insert(parent).second) return;
  }
  std::string list;
  for (size_t i = 0; i < names.size() && i < 10; ++i) list += (i ? ", '" : "'") + names[i] + "'";
  if (names.size() > 10) list += " and " + std::to_string(names.size() - 10) + " more";
  LOG(WARNING) << "checkpoint folder " << parent << ": ignoring " << names.size()
               << " entr" << (names.size() == 1 ? "y" : "ies") << " that Tether did not write: " << list
               << " (a checkpoint is a directory named ckpt-<12 to 19 digits>[-final][-rN]; these are never read, "
                  "resumed from or pruned)";
}

std::vector<Found> ListCheckpoints(const std::string& parent) {
  std::vector<Found> out;
  std::vector<std::string> foreign;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = e.path().filename().string();
    Found f;
    if (!e.is_directory(ec) || !ParseCheckpointName(name, &f.clock, &f.final, &f.attempt)) {
      if (name != kCheckpointLockName) foreign.push_back(name);  // the folder's lock (checkpoint/dir_lock.h)
      continue;
    }
    f.path = e.path().string();
    f.complete = std::filesystem::exists(CheckpointJoinPath(f.path, kManifestName), ec);
    out.push_back(f);
  }
  std::sort(foreign.begin(), foreign.end());
  WarnForeignEntries(parent, foreign);
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
      // Root may "write" /proc and /sys, which take no checkpoint.
      return CheckWritableDir(dir, "checkpoint.dir (--checkpoint_dir)");
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

Status CopyWorkerFiles(FileSystem* fs, const std::string& from_dir, const std::string& to_dir,
                       const CheckpointFile& state_file) {
  const std::string path = CheckpointJoinPath(from_dir, state_file.name());
  CheckedReader r(path, state_file);
  TETHER_RETURN_IF_ERROR(r.Open());
  std::string bytes(state_file.bytes(), '\0');
  TETHER_RETURN_IF_ERROR(r.Read(bytes.data(), bytes.size(), "the worker state"));
  TETHER_RETURN_IF_ERROR(r.Finish());
  TETHER_RETURN_IF_ERROR(r.Check());
  WorkerState s;
  if (!s.ParseFromString(bytes)) return Status::DataLoss(path + ": not a worker state");
  TETHER_RETURN_IF_ERROR(fs->CreateDirs(to_dir));
  // The residuals first: the state that names them is written after them.
  if (s.has_residual_file()) TETHER_RETURN_IF_ERROR(CopyCheckpointFile(fs, from_dir, to_dir, s.residual_file()));
  return WriteSmallFile(fs, CheckpointJoinPath(to_dir, state_file.name()), bytes, nullptr, state_file.name());
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
  // The first line is part of the manifest's bytes and stays as every
  // release wrote it (the file that defines the format has moved since).
  text = "# Tether checkpoint manifest (server/checkpoint.h); the last line checks the rest.\n" + text;
  text += "# xxh3 " + ChecksumHex(ChecksumOf(text.data(), text.size())) + "\n";
  return WriteSmallFile(fs, CheckpointJoinPath(ckpt_dir, kManifestName), text, nullptr, kManifestName);
}

StatusOr<CheckpointManifest> ReadManifest(const std::string& ckpt_dir) {
  const std::string path = CheckpointJoinPath(ckpt_dir, kManifestName);
  // Opened without blocking, checked and read on one descriptor: a FIFO or
  // a device named MANIFEST is refused by name, never waited on or read.
  StatusOr<RegularFile> file = OpenRegularFile(path, "");
  if (file.status().code() == Status::Code::kNotFound)
    return Status::NotFound(ckpt_dir + " is not a checkpoint: it has no " + kManifestName);
  if (!file.ok()) return file.status();
  // A file that large is not a manifest, and is never read whole (nor one
  // that grows past the bound while it is read).
  StatusOr<std::string> read = ReadOpenedFile(*file, kMaxManifestBytes, path, "");
  if (read.status().code() == Status::Code::kInvalidArgument)
    return Status::DataLoss(path + ": larger than a manifest can be (" + std::to_string(kMaxManifestBytes) +
                            " bytes)");
  if (!read.ok()) return read.status();
  const std::string& text = *read;
  return ParseManifest(path, text);
}

StatusOr<CheckpointManifest> ParseManifest(const std::string& path, const std::string& text) {
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

Status CheckManifestSizes(const std::string& path, const CheckpointManifest& m) {
  uint64_t dense_bytes = 0, file_bytes = 0;
  for (const TableSpec& t : m.tables()) {
    if (!IsDenseTable(t)) continue;
    if (t.size() > (uint64_t{1} << 40))
      return Status::DataLoss(path + ": dense table '" + t.name() + "' claims " + std::to_string(t.size()) + " weights");
    dense_bytes += t.size() * sizeof(float);
  }
  for (const CheckpointFile& f : m.files()) {
    if (f.bytes() > (uint64_t{1} << 50))
      return Status::DataLoss(path + ": file '" + f.name() + "' claims " + std::to_string(f.bytes()) + " bytes");
    file_bytes += f.bytes();
  }
  // Every weight of a dense table is in some shard file.
  if (dense_bytes > file_bytes)
    return Status::DataLoss(path + ": its dense tables hold " + std::to_string(dense_bytes) +
                            " bytes of weights, more than its files' " + std::to_string(file_bytes) + " bytes");
  if (m.num_servers() < 1 || m.num_servers() > m.files_size())
    return Status::DataLoss(path + ": " + std::to_string(m.num_servers()) + " servers, but " +
                            std::to_string(m.files_size()) + " files listed");
  return Status::OK();
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

namespace {

// `st` with `more` after its message, its code kept (callers tell bad input
// from a fault by the code).
Status Appended(const Status& st, const std::string& more) {
  const std::string m = st.message() + more;
  switch (st.code()) {
    case Status::Code::kNotFound: return Status::NotFound(m);
    case Status::Code::kDataLoss: return Status::DataLoss(m);
    case Status::Code::kInvalidArgument: return Status::InvalidArgument(m);
    case Status::Code::kFailedPrecondition: return Status::FailedPrecondition(m);
    default: return Status::IOError(m);
  }
}

}  // namespace

std::string OlderCheckpointsAdvice(const std::string& ckpt_dir) {
  std::filesystem::path p = std::filesystem::path(ckpt_dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  const std::string folder = p.parent_path().empty() ? "." : p.parent_path().string();
  const std::string name = p.filename().string();
  const std::string ckpt = p.string();  // without a trailing slash
  std::vector<std::string> older;
  for (const Found& f : ListCheckpoints(folder)) {
    const std::string n = std::filesystem::path(f.path).filename().string();
    if (n == name) break;  // the rest are newer
    if (f.complete) older.push_back(n);
  }
  // Newest first: the one to try next.
  std::string list;
  for (auto it = older.rbegin(); it != older.rend() && list.size() < 200; ++it)
    list += (list.empty() ? "" : ", ") + *it;
  if (older.empty())
    return "checkpoint " + ckpt + " is damaged or incomplete, and " + folder +
           " holds no older complete checkpoint to resume from";
  return "checkpoint " + ckpt + " is damaged or incomplete; resume from an older one with --resume_from=" +
         CheckpointJoinPath(folder, older.back()) + " (older complete ones in " + folder + ", newest first: " + list +
         (list.size() >= 200 ? ", ..." : "") + ")";
}

Status VerifyResumeCheckpoint(const std::string& resume_from) {
  if (resume_from.empty()) return Status::OK();
  TETHER_ASSIGN_OR_RETURN(const std::string dir, ResolveCheckpoint(resume_from));
  StatusOr<CheckpointManifest> m = ReadManifest(dir);
  Status st = m.ok() ? VerifyCheckpointFiles(dir, *m) : m.status();
  if (st.ok()) return st;
  return WithOlderCheckpointsAdvice(st, dir);
}

Status WithOlderCheckpointsAdvice(const Status& st, const std::string& ckpt_dir) {
  if (st.ok() || st.message().find(" is damaged or incomplete") != std::string::npos) return st;
  return Appended(st, "; " + OlderCheckpointsAdvice(ckpt_dir));
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
                            const google::protobuf::RepeatedPtrField<TableSpec>& job,
                            const std::string& checkpoint_name, const std::string& job_name, const std::string& why) {
  if (checkpoint.size() != job.size())
    return checkpoint_name + " has " + std::to_string(checkpoint.size()) + " tables, " + job_name + " " +
           std::to_string(job.size());
  for (int i = 0; i < job.size(); ++i) {
    const TableSpec& a = checkpoint[i];
    const TableSpec& b = job[i];
    const std::string t = "table '" + a.name() + "'";
    auto differ = [&](const std::string& field, const std::string& x, const std::string& y) {
      return t + ", field " + field + ": " + checkpoint_name + " has " + x + ", " + job_name + " has " + y + why;
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

std::string DiffInputTransform(const DataConfig& checkpoint, const DataConfig& job) {
  const auto text = [](double v) {
    std::ostringstream os;
    os << v;
    return os.str();
  };
  const auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
  const std::pair<const char*, std::pair<std::string, std::string>> fields[] = {
      {"feature_scale", {text(checkpoint.feature_scale()), text(job.feature_scale())}},
      {"feature_offset", {text(checkpoint.feature_offset()), text(job.feature_offset())}},
      {"tf_idf", {flag(checkpoint.tf_idf()), flag(job.tf_idf())}},
      {"normalize_rows", {flag(checkpoint.normalize_rows()), flag(job.normalize_rows())}},
  };
  for (const auto& [field, values] : fields)
    if (values.first != values.second)
      return std::string("field data.") + field + ": the checkpoint has " + values.first + ", the job has " +
             values.second + " (a resume reads its rows as the checkpoint's model was trained on them)";
  return "";
}

std::string DiffValidationRows(const JobConfig& checkpoint, const JobConfig& job) {
  const auto text = [](double v) {
    std::ostringstream os;
    os << v;
    return os.str();
  };
  const auto file = [](const std::string& path) { return path.empty() ? std::string("none") : "'" + path + "'"; };
  const DataConfig& cd = checkpoint.data();
  const DataConfig& jd = job.data();
  const TrainConfig& ct = checkpoint.train();
  const TrainConfig& jt = job.train();
  std::pair<std::string, std::string> values;
  const char* field = nullptr;
  // A different file on both sides is the data stamps' to judge (the same
  // rows may lie at another path).
  if (cd.validation_split().empty() != jd.validation_split().empty()) {
    field = "data.validation_split";
    values = {file(cd.validation_split()), file(jd.validation_split())};
  } else if (ct.validation_fraction() != jt.validation_fraction()) {
    field = "train.validation_fraction";
    values = {text(ct.validation_fraction()), text(jt.validation_fraction())};
  } else if (ct.validation_fraction() > 0 && ct.validation_seed() != jt.validation_seed()) {
    field = "train.validation_seed";
    values = {std::to_string(ct.validation_seed()), std::to_string(jt.validation_seed())};
  }
  if (field == nullptr) return "";
  return std::string("field ") + field + ": the checkpoint has " + values.first + ", the job has " + values.second +
         " (the validation rows are left out of training: a resume trains on the rows the checkpoint's run "
         "trained on)";
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
