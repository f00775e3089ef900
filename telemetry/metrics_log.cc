#include "telemetry/metrics_log.h"

#include <filesystem>

#include <sys/stat.h>
#include <unistd.h>

#include <glog/logging.h>

#include <cerrno>
#include <cstring>

#include "core/process_limits.h"

namespace tether {

MetricsLog::MetricsLog(std::string path, std::string role, int rank)
    : path_(std::move(path)), role_(std::move(role)), rank_(rank), start_(std::chrono::steady_clock::now()) {}

namespace {

constexpr char kSource[] = "train.metrics_dir (--metrics_dir)";

// The lock file of DIR/NAME.jsonl: DIR/NAME.lock, in the folder named (not a
// link's target), never moved aside with the file.
std::string LockPathOf(const std::string& dir, const std::string& name) { return dir + "/" + name + ".lock"; }

std::string LockedWhat(const std::string& dir, const std::string& name) {
  return std::string(kSource) + "=" + dir + ": " + name + ".jsonl";
}

constexpr char kLockFix[] =
    "another process of that rank writes it; give this job its own folder (each process of one job writes a file of "
    "its own there)";

// Moves a non-empty `path` (FOLDER/NAME.jsonl, or FOLDER/NAME) to the first
// free FOLDER/NAME.N.jsonl (FOLDER/NAME.N); returns where ("" when there was
// nothing to move). `path` is a regular file: a link's final target.
StatusOr<std::string> MoveEarlierRun(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec || size == 0) return std::string();
  const bool jsonl = path.size() > 6 && path.compare(path.size() - 6, 6, ".jsonl") == 0;
  const std::string stem = jsonl ? path.substr(0, path.size() - 6) : path;
  for (int n = 1; n < 1000000; ++n) {
    const std::string to = stem + "." + std::to_string(n) + (jsonl ? ".jsonl" : "");
    if (fs::exists(fs::symlink_status(to, ec))) continue;
    // link + unlink rather than rename: a file made meanwhile under `to`
    // is never overwritten.
    if (::link(path.c_str(), to.c_str()) != 0) {
      if (errno == EEXIST) continue;
      return Status::IOError("cannot move the earlier run's metrics file " + path + " to " + to + ": " +
                             std::strerror(errno));
    }
    if (::unlink(path.c_str()) != 0)
      return Status::IOError("cannot move the earlier run's metrics file " + path + ": " + std::strerror(errno));
    return to;
  }
  return Status::IOError("the folder of " + path + " holds too many earlier runs of it");
}

// The file this process writes for `path`: `path` itself, or its link's
// final target, under the output policy (see the header).
StatusOr<std::string> LogFile(const std::string& path, const std::vector<NamedInput>& inputs) {
  TETHER_ASSIGN_OR_RETURN(const OutputTarget target, ResolveOutputTarget(path, kSource, StreamOutput::kWriteThrough));
  if (target.write_through) {
    const std::string shown = target.path == path ? path : path + " (a link to " + target.path + ")";
    return Status::InvalidArgument(std::string(kSource) + "=" + shown +
                                   ": is a character device or FIFO, not a regular file; an earlier run's lines "
                                   "there would be moved aside, which it cannot be: remove it, or give another folder");
  }
  TETHER_RETURN_IF_ERROR(CheckOutputNotInput(path, kSource, inputs));
  return target.path;
}

}  // namespace

Status MetricsLog::CheckPath(const std::string& dir, const std::string& role, int rank,
                             const std::vector<NamedInput>& inputs) {
  const std::string name = role + "-" + std::to_string(rank);
  TETHER_RETURN_IF_ERROR(LogFile(dir + "/" + name + ".jsonl", inputs).status());
  return FileLock::Probe(LockPathOf(dir, name), LockedWhat(dir, name), kLockFix);
}

StatusOr<std::unique_ptr<MetricsLog>> MetricsLog::Open(const std::string& dir, const std::string& role, int rank,
                                                       const std::vector<NamedInput>& inputs) {
  if (dir.empty()) return Status::InvalidArgument("metrics directory is empty");
  // Its parents too: "--metrics_dir=out/bibtex" in a fresh clone.
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError("cannot create metrics directory " + dir + ": " + ec.message());
  const std::string name = role + "-" + std::to_string(rank);
  const std::string path = dir + "/" + name + ".jsonl";
  TETHER_ASSIGN_OR_RETURN(const std::string file, LogFile(path, inputs));
  // Before anything moves: a live process of this rank keeps its file.
  TETHER_ASSIGN_OR_RETURN(FileLock lock, FileLock::Acquire(LockPathOf(dir, name), LockedWhat(dir, name), kLockFix));
  std::unique_ptr<MetricsLog> log(new MetricsLog(path, role, rank));
  log->lock_ = std::move(lock);
  TETHER_ASSIGN_OR_RETURN(log->moved_to_, MoveEarlierRun(file));
  if (!log->moved_to_.empty())
    LOG(WARNING) << "metrics file " << path << (file == path ? "" : " (a link to " + file + ")")
                 << " held an earlier run: moved to " << log->moved_to_ << "; this run writes a new " << file;
  log->out_.open(file, std::ios::app);
  if (!log->out_) return Status::IOError("cannot open metrics file " + file);
  return log;
}

double MetricsLog::Seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void MetricsLog::Write(nlohmann::json fields) {
  fields["t"] = Seconds();
  fields["unix_time"] =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  fields["role"] = role_;
  fields["rank"] = rank_;
  out_ << fields.dump() << '\n';
  // A reader tailing the file (a plot of a running job) sees lines within
  // about a hundred clocks; flushing every line would cost a syscall each.
  if (++lines_since_flush_ >= 100) {
    out_.flush();
    lines_since_flush_ = 0;
  }
}

Status MetricsLog::Flush() {
  out_.flush();
  lines_since_flush_ = 0;
  if (!out_) {
    // ofstream keeps no errno of its own; the last write's is the best guess.
    const int err = errno;
    return Status::IOError("cannot write metrics file " + path_ + (err != 0 ? ": " + std::string(std::strerror(err)) : "") +
                           (err == EFBIG ? FileSizeLimitNote() : std::string()));
  }
  return Status::OK();
}

ProgressTimer::ProgressTimer(double every_s)
    : every_s_(every_s),
      next_(std::chrono::steady_clock::now() +
            std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(every_s))) {}

bool ProgressTimer::Due() {
  if (every_s_ <= 0) return false;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_) return false;
  next_ = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(every_s_));
  return true;
}

}  // namespace tether
