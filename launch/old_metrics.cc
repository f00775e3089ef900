#include "launch/old_metrics.h"

#include <glog/logging.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/output_path.h"
#include "core/output_target.h"

namespace tether {
namespace {

// The regular file at `path` that the launcher may remove (empty: nothing
// to remove).
StatusOr<std::string> OldMetricsFile(const std::string& path, const std::string& source) {
  TETHER_RETURN_IF_ERROR(CheckWritableFile(path, source, false, StreamOutput::kWriteThrough));
  TETHER_ASSIGN_OR_RETURN(const OutputTarget target, ResolveOutputTarget(path, source, StreamOutput::kWriteThrough));
  if (!target.exists || target.write_through) return std::string();
  if (!IsMetricsJson(target.path)) {
    const std::string shown = target.path == path ? path : path + " (a link to " + target.path + ")";
    return Status::InvalidArgument(source + "=" + shown +
                                   ": holds a file that is not a Tether metrics JSON; tether-launch replaces only an "
                                   "earlier run's metrics there: give another file name, or move that file away");
  }
  return target.path;
}

}  // namespace

bool IsMetricsJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return false;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  if (j.contains("train_seconds") && j.contains("samples_per_second")) return true;
  // The file tether-launch writes for a failed job no worker wrote one for
  // (launch/failure_metrics.h): exactly these two keys.
  const auto failure = j.find("failure");
  const auto exit_code = j.find("exit_code");
  return j.size() == 2 && failure != j.end() && failure->is_string() && exit_code != j.end() &&
         exit_code->is_number_integer();
}

Status CheckMetricsOutReplaceable(const std::string& path, const std::string& source) {
  return OldMetricsFile(path, source).status();
}

Status RemoveOldMetrics(const std::string& path, const std::string& source) {
  TETHER_ASSIGN_OR_RETURN(const std::string old, OldMetricsFile(path, source));
  if (old.empty()) return Status::OK();
  if (::unlink(old.c_str()) != 0 && errno != ENOENT)
    return Status::IOError("cannot remove the earlier run's metrics file " + old + ": " + std::strerror(errno));
  LOG(INFO) << "[launch] removed the earlier run's metrics file " << old
            << " (a Tether metrics JSON), so that it cannot pass for this run's";
  return Status::OK();
}

}  // namespace tether
