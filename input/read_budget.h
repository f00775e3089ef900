// The bound on what reading one data file may hold in memory: the memory
// the process may count on (core/memory_fit.h, MemoryBudgetFor: the
// configured consistency.memory_limit_bytes / --memory_limit, else
// MemAvailable lowered by the cgroup and address-space limits). A gzip file
// of a few MB can inflate to tens of GB, and a plain file can be larger than
// the machine: a reader refuses such a file as soon as what it would hold
// passes the budget, naming the file, instead of reading until the kernel
// kills the process.
//
// What is bounded: the decoded bytes of a file read whole (XMC, LIBSVM,
// IDX, split and label files) and, for XMC and LIBSVM, those bytes plus the
// least their rows parse into; the decoded bytes of the files a share of a
// file list keeps in memory (ReadFileListShare); and the longest line a
// streaming reader must hold (RowStream, ARFF).
//
// Pure functions, but for ResolveReadBudget (it reads /proc and the cgroup
// files); thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "core/memory_fit.h"
#include "core/status.h"

namespace tether {

/// The budget a read uses: `given` when given.bytes > 0, else the process's
/// own (MemoryBudgetFor a config without memory_limit_bytes: MemAvailable
/// now, or the cgroup or address-space limit when lower). A result with
/// bytes 0 means that nothing could be read: no bound.
MemoryBudget ResolveReadBudget(const MemoryBudget& given);

/// The most bytes a read under the resolved `budget` may hold: budget.bytes,
/// or UINT64_MAX when it is 0 (unknown).
uint64_t ReadLimitBytes(const MemoryBudget& budget);

/// The refusal of the data file `path`, in the style of CheckWorkerFits:
/// InvalidArgument (bad input: a worker exits kExitBadInput, which the
/// launcher never restarts) "data file PATH: WHAT 16.0 MiB (16777216
/// bytes), the memory this process may count on (SOURCE); give it more
/// memory (--memory_limit) or split the file (docs/DATA.md)". `what` says
/// how far the read got, ending before the budget: "inflates to more than",
/// "is 20.0 MiB (20971520 bytes), more than", "line 3 is longer than".
/// "(--memory_limit)" is named only when the budget came from it (tools
/// without the flag count on MemAvailable). `cure`, when not empty,
/// replaces "split the file (docs/DATA.md)".
Status DataFileTooLarge(const std::string& path, const std::string& what, const MemoryBudget& budget,
                        const std::string& cure = "");

}  // namespace tether
