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

// Moves a non-empty `path` (DIR/NAME.jsonl) to the first free
// DIR/NAME.N.jsonl; returns where ("" when there was nothing to move).
StatusOr<std::string> MoveEarlierRun(const std::string& dir, const std::string& name, const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec || size == 0) return std::string();
  for (int n = 1; n < 1000000; ++n) {
    const std::string to = dir + "/" + name + "." + std::to_string(n) + ".jsonl";
    if (fs::exists(to, ec)) continue;
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
  return Status::IOError("metrics directory " + dir + " holds too many earlier runs of " + name);
}

}  // namespace

StatusOr<std::unique_ptr<MetricsLog>> MetricsLog::Open(const std::string& dir, const std::string& role, int rank) {
  if (dir.empty()) return Status::InvalidArgument("metrics directory is empty");
  // Its parents too: "--metrics_dir=out/bibtex" in a fresh clone.
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError("cannot create metrics directory " + dir + ": " + ec.message());
  const std::string name = role + "-" + std::to_string(rank);
  const std::string path = dir + "/" + name + ".jsonl";
  std::unique_ptr<MetricsLog> log(new MetricsLog(path, role, rank));
  TETHER_ASSIGN_OR_RETURN(log->moved_to_, MoveEarlierRun(dir, name, path));
  if (!log->moved_to_.empty())
    LOG(WARNING) << "metrics file " << path << " held an earlier run: moved to " << log->moved_to_
                 << "; this run writes a new " << path;
  log->out_.open(path, std::ios::app);
  if (!log->out_) return Status::IOError("cannot open metrics file " + path);
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
