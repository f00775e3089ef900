#include "input/read_budget.h"

#include <limits>

namespace tether {

MemoryBudget ResolveReadBudget(const MemoryBudget& given) {
  if (given.bytes > 0) return given;
  return MemoryBudgetFor(JobConfig());
}

uint64_t ReadLimitBytes(const MemoryBudget& budget) {
  return budget.bytes > 0 ? budget.bytes : std::numeric_limits<uint64_t>::max();
}

Status DataFileTooLarge(const std::string& path, const std::string& what, const MemoryBudget& budget,
                        const std::string& cure) {
  // Only a configured limit can be raised by a flag; MemAvailable and a
  // cgroup limit are the machine's.
  const bool flag = budget.source.find("--memory_limit") != std::string::npos;
  return Status::InvalidArgument("data file " + path + ": " + what + " " + FormatBytes(budget.bytes) +
                                 ", the memory this process may count on (" + budget.source + "); give it more memory" +
                                 (flag ? " (--memory_limit)" : "") + " or " +
                                 (cure.empty() ? std::string("split the file (docs/DATA.md)") : cure));
}

}  // namespace tether
