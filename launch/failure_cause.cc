#include "launch/failure_cause.h"

#include <sys/wait.h>

#include <optional>

#include "launch/unrestartable.h"

namespace tether {
namespace {

bool Failed(const EndedProcess& p) {
  return !p.stopped && !(WIFEXITED(p.wait_status) && WEXITSTATUS(p.wait_status) == 0);
}

}  // namespace

FailureCause JudgeFailure(const std::vector<EndedProcess>& ended) {
  FailureCause verdict;
  const int n = static_cast<int>(ended.size());
  for (int i = 0; i < n; ++i) {
    if (ended[i].stopped) continue;
    if (const std::optional<Unrestartable> u = UnrestartableExit(ended[i].name, ended[i].wait_status)) {
      verdict.cause = i;
      verdict.job_exit = u->job_exit;
      verdict.why = u->why;
      return verdict;
    }
  }
  const auto first = [&](auto&& pred) {
    for (int i = 0; i < n; ++i)
      if (!ended[i].in_teardown && pred(ended[i])) return i;
    return -1;
  };
  for (const int i : {first([](const EndedProcess& p) { return !p.stopped && WIFSIGNALED(p.wait_status); }),
                      first([](const EndedProcess& p) { return p.stopped && p.role == "worker"; }),
                      first([](const EndedProcess& p) { return Failed(p) && p.role == "worker"; }),
                      first([](const EndedProcess& p) { return Failed(p); })}) {
    if (i >= 0) {
      verdict.cause = i;
      return verdict;
    }
  }
  return verdict;
}

}  // namespace tether
