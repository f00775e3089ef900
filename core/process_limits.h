// The process's own limits: what the kernel lets this process hold (address
// space, open files, file size) and the memory its cgroup may use, read once
// at start, fitted where a process may (the soft open-file and file-size
// limits are raised to the hard ones; malloc keeps fewer arenas under an
// address-space limit), and refused, naming the limit, where the rest is
// too small to start. Every binary does this in ParseFlagsOrDie
// (cli/flag_parser.h); the numbers then feed the memory checks
// (MemoryBudgetFor, core/memory_fit.h), the connection caps of listening
// sockets (core/net/listener_guard.h) and the messages of writes that hit
// the file-size limit (FileSizeLimitNote).
//
// Sources: getrlimit(2); /proc/self/status (VmSize); cgroup v2
// (memory.max, memory.current) or v1 (memory.limit_in_bytes,
// memory.usage_in_bytes) of the cgroup /proc/self/cgroup names, under
// /sys/fs/cgroup, the lowest limit of it and its ancestors.
//
// Thread-safety: ReadProcessLimits and FitProcessLimits are pure but for
// the files and setrlimit; CurrentProcessLimits() returns the snapshot the
// last FitProcessLimits published (a copy, under a mutex).
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace tether {

/// A limit of 0 means none (unlimited).
struct ProcessLimits {
  uint64_t address_space_bytes = 0;  // RLIMIT_AS, soft (ulimit -v)
  uint64_t mapped_bytes = 0;         // VmSize when read: the address space in use
  uint64_t open_files = 0;           // RLIMIT_NOFILE, soft (ulimit -n)
  uint64_t open_files_hard = 0;
  uint64_t file_size_bytes = 0;      // RLIMIT_FSIZE, soft (ulimit -f)
  uint64_t cgroup_memory_bytes = 0;  // the cgroup's memory limit
  uint64_t cgroup_memory_used_bytes = 0;
  std::string cgroup_file;           // the file the cgroup limit came from
};

/// Where the limits are read (tests point these at fixtures).
struct LimitSources {
  std::string proc_self_cgroup = "/proc/self/cgroup";
  std::string cgroup_root = "/sys/fs/cgroup";
  std::string proc_self_status = "/proc/self/status";
  bool read_rlimits = true;  // false: keep the rlimit fields as given (tests)
};

/// Reads the limits. Unreadable sources leave their fields 0 (no limit
/// known); never fails.
ProcessLimits ReadProcessLimits(const LimitSources& sources = LimitSources{});

/// What a process needs at least to start.
struct LimitNeeds {
  uint64_t open_files = 256;                   // sockets, data files, checkpoints, logs
  uint64_t free_address_space_bytes = 256ull << 20;
  uint64_t free_memory_bytes = 64ull << 20;    // under the cgroup limit
  uint64_t file_size_bytes = 1ull << 20;       // metrics lines, manifests
};

/// Fits `*limits` (as read) to `needs`: raises the soft RLIMIT_NOFILE and
/// RLIMIT_FSIZE to their hard limits (when `apply`: setrlimit; else only in
/// `*limits`), and caps malloc's arenas when an address-space limit is set
/// (each thread's arena reserves 64 MiB of it). Publishes the result for
/// CurrentProcessLimits(). Errors: ResourceExhausted naming the limit, its
/// value, what is needed and how to raise it ("the open-file limit
/// (RLIMIT_NOFILE, ulimit -n) is 64, below the 256 Tether needs ...").
Status FitProcessLimits(const LimitNeeds& needs, ProcessLimits* limits, bool apply = true);

/// The snapshot FitProcessLimits published (ReadProcessLimits() when none
/// was).
ProcessLimits CurrentProcessLimits();

/// Memory the process may still count on under its cgroup and address-space
/// limits: the smaller of (cgroup limit − cgroup usage) and (RLIMIT_AS −
/// VmSize), 0 when neither is set. `source` names the limit that decided
/// ("the cgroup memory limit (FILE)", "the address-space limit (RLIMIT_AS,
/// ulimit -v)").
uint64_t LimitedMemoryBytes(const ProcessLimits& limits, std::string* source);

/// The most memory the process could ever hold, in bytes: the host's
/// physical memory (`physical_bytes`; sysconf when 0), or its cgroup's
/// memory limit or address-space limit when lower (a container's or a
/// SLURM job's share is often far below the host's). 0 when none is known.
/// `source` (when not null) names the one that decided ("physical memory",
/// "the cgroup memory limit (FILE)", "the address-space limit (RLIMIT_AS,
/// ulimit -v)").
uint64_t MemoryCeilingBytes(const ProcessLimits& limits, std::string* source, uint64_t physical_bytes = 0);

/// Open files this process may give to peers' connections: the soft
/// RLIMIT_NOFILE less `reserve` (kept for data files, checkpoints, logs and
/// the transport's own descriptors), at least 0.
uint64_t ConnectionDescriptorBudget(const ProcessLimits& limits, uint64_t reserve);

/// For a write that failed with EFBIG: " (the file-size limit RLIMIT_FSIZE,
/// ulimit -f, is N bytes)" when one is set, else "".
std::string FileSizeLimitNote();

}  // namespace tether
