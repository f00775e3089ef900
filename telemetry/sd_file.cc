#include "telemetry/sd_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/file_util.h"
#include "core/output_path.h"

namespace tether {

namespace {

constexpr char kSource[] = "flag --metrics_sd_file";

}  // namespace

Status CheckSdFile(const std::string& path, const std::vector<NamedInput>& inputs) {
  TETHER_RETURN_IF_ERROR(CheckWritableFile(path, kSource, /*create_parents=*/false, StreamOutput::kRefuse));
  return CheckOutputNotInput(path, kSource, inputs);
}

Status WriteSdFile(const std::string& path, const std::string& contents) {
  // Resolved again: the path may have changed since the start-up check.
  TETHER_RETURN_IF_ERROR(ResolveOutputTarget(path, kSource, StreamOutput::kRefuse).status());
  return WriteFileAtomically(path, contents, StreamOutput::kRefuse);
}

Status WithdrawSdFile(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return Status::OK();  // nothing there (or it went)
  TETHER_ASSIGN_OR_RETURN(const OutputTarget target, ResolveOutputTarget(path, kSource, StreamOutput::kRefuse));
  if (!S_ISLNK(st.st_mode)) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      return Status::IOError(std::string(kSource) + "=" + path + ": cannot remove it: " + std::strerror(errno));
    return Status::OK();
  }
  // The link stays, and reads as "no targets" (see the header).
  return WriteFileAtomically(target.path, "[]\n", StreamOutput::kRefuse);
}

}  // namespace tether
