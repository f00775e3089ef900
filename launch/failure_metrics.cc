#include "launch/failure_metrics.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "core/output_target.h"
#include "launch/old_metrics.h"

namespace tether {

namespace {

constexpr char kSource[] = "flag --metrics_out";

}  // namespace

StatusOr<FailureRecord> RecordJobFailure(const std::string& path, const std::string& failure, int exit_code) {
  TETHER_ASSIGN_OR_RETURN(const OutputTarget target, ResolveOutputTarget(path, kSource, StreamOutput::kWriteThrough));
  if (target.write_through) return FailureRecord::kSkipped;
  nlohmann::json j = nlohmann::json::object();
  FailureRecord record = FailureRecord::kWritten;
  if (target.exists) {
    if (!IsMetricsJson(target.path)) {
      const std::string shown = target.path == path ? path : path + " (a link to " + target.path + ")";
      return Status::InvalidArgument(std::string(kSource) + "=" + shown +
                                     ": holds a file that is not a Tether metrics JSON: the job's failure is not "
                                     "recorded there, and the file is left as it is");
    }
    std::ifstream in(target.path);
    j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    record = j.contains("failure") ? FailureRecord::kKept : FailureRecord::kAdded;
  }
  if (!j.contains("failure")) j["failure"] = failure;
  j["exit_code"] = exit_code;
  // The link's target, through the same resolution as every output.
  TETHER_RETURN_IF_ERROR(WriteFileAtomically(path, j.dump(2) + "\n"));
  return record;
}

}  // namespace tether
