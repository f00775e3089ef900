#include "telemetry/metrics_log.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "core/process_limits.h"

namespace tether {

MetricsLog::MetricsLog(std::string path, std::string role, int rank)
    : path_(std::move(path)), role_(std::move(role)), rank_(rank), start_(std::chrono::steady_clock::now()) {}

StatusOr<std::unique_ptr<MetricsLog>> MetricsLog::Open(const std::string& dir, const std::string& role, int rank) {
  if (dir.empty()) return Status::InvalidArgument("metrics directory is empty");
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Status::IOError("cannot create metrics directory " + dir + ": " + std::strerror(errno));
  const std::string path = dir + "/" + role + "-" + std::to_string(rank) + ".jsonl";
  std::unique_ptr<MetricsLog> log(new MetricsLog(path, role, rank));
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
