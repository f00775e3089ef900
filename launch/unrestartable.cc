#include "launch/unrestartable.h"

#include <sys/wait.h>

#include "worker/train/job_outcome.h"

namespace tether {

std::optional<Unrestartable> UnrestartableExit(const std::string& name, int wait_status) {
  if (!WIFEXITED(wait_status)) return std::nullopt;
  const int code = WEXITSTATUS(wait_status);
  // Exit 2 is a configuration, flag or path refused before the process did
  // anything (docs/ERRORS.md): every restart would be refused the same way.
  if (code == 2) return Unrestartable{2, name + " refused its configuration (exit 2): the job exits 2, not restarted"};
  // A restart reads the same files, and fails on the same line.
  if (code == kExitBadInput)
    return Unrestartable{kExitBadInput, name + " refused its input data (exit " + std::to_string(kExitBadInput) +
                                            ": the error above names the file and what is wrong in it): the job exits " +
                                            std::to_string(kExitBadInput) +
                                            ", not restarted (the input is bad: a restart would read it again)"};
  return std::nullopt;
}

}  // namespace tether
