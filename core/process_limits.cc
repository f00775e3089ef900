#include "core/process_limits.h"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "core/memory_fit.h"

namespace tether {
namespace {

std::mutex g_mu;
bool g_published = false;
ProcessLimits g_limits;

// A cgroup v1 "no limit" is a page-rounded LLONG_MAX; anything this large
// is no limit either way.
constexpr uint64_t kNoLimit = 1ull << 62;

uint64_t Soft(const struct rlimit& r) { return r.rlim_cur == RLIM_INFINITY ? 0 : r.rlim_cur; }
uint64_t Hard(const struct rlimit& r) { return r.rlim_max == RLIM_INFINITY ? 0 : r.rlim_max; }

// A file holding one number ("max" or a huge one: 0, no limit); false when
// unreadable.
bool ReadNumberFile(const std::string& path, uint64_t* out) {
  std::ifstream in(path);
  std::string text;
  if (!in || !(in >> text)) return false;
  if (text == "max") {
    *out = 0;
    return true;
  }
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 19) return false;
  const uint64_t v = std::stoull(text);
  *out = v >= kNoLimit ? 0 : v;
  return true;
}

// The folder of this process's memory cgroup: the v2 ("0::/p") or v1
// ("N:...memory...:/p") path under its hierarchy's mount, or the mount
// itself when a cgroup namespace shows the process's cgroup as the root.
std::vector<std::string> CgroupDirs(const LimitSources& src, bool* v2) {
  std::ifstream in(src.proc_self_cgroup);
  std::string line, v1_path, v2_path;
  bool have_v1 = false, have_v2 = false;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {
      have_v2 = true;
      v2_path = path;
    }
    std::stringstream ss(controllers);
    for (std::string c; std::getline(ss, c, ',');)
      if (c == "memory") {
        have_v1 = true;
        v1_path = path;
      }
  }
  std::vector<std::string> dirs;
  const auto add = [&](const std::string& mount, const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(mount + path, ec)) dirs.push_back(mount + path);
    if (std::filesystem::is_directory(mount, ec)) dirs.push_back(mount);
  };
  *v2 = !have_v1 && have_v2;
  if (have_v1) add(src.cgroup_root + "/memory", v1_path == "/" ? "" : v1_path);
  else if (have_v2) add(src.cgroup_root, v2_path == "/" ? "" : v2_path);
  return dirs;
}

// The lowest memory limit of the cgroup and its ancestors up to the mount,
// and the usage of the cgroup that set it.
void ReadCgroupMemory(const LimitSources& src, ProcessLimits* out) {
  bool v2 = false;
  const std::vector<std::string> dirs = CgroupDirs(src, &v2);
  if (dirs.empty()) return;
  const std::string limit_name = v2 ? "memory.max" : "memory.limit_in_bytes";
  const std::string usage_name = v2 ? "memory.current" : "memory.usage_in_bytes";
  const std::string mount = dirs.back();
  for (std::filesystem::path dir = dirs.front();; dir = dir.parent_path()) {
    uint64_t limit = 0;
    if (ReadNumberFile((dir / limit_name).string(), &limit) && limit > 0 &&
        (out->cgroup_memory_bytes == 0 || limit < out->cgroup_memory_bytes)) {
      out->cgroup_memory_bytes = limit;
      out->cgroup_file = (dir / limit_name).string();
      uint64_t used = 0;
      out->cgroup_memory_used_bytes = ReadNumberFile((dir / usage_name).string(), &used) ? used : 0;
    }
    if (dir.string().size() <= mount.size() || !dir.has_parent_path()) break;
  }
}

uint64_t ReadVmSize(const std::string& status_path) {
  std::ifstream in(status_path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmSize:", 0) != 0) continue;
    std::stringstream ss(line.substr(7));
    uint64_t kb = 0;
    ss >> kb;
    return kb * 1024;
  }
  return 0;
}

// Raises the soft limit of `resource` to its hard limit (at most `cap`, 0:
// none); returns the soft limit in force after.
uint64_t RaiseSoft(int resource, uint64_t cap, bool apply, uint64_t soft, uint64_t hard) {
  uint64_t want = hard;  // 0: unlimited
  if (cap > 0 && (want == 0 || want > cap)) want = cap;
  if (soft == 0 || (want != 0 && soft >= want)) return soft;
  if (!apply) return want;
  struct rlimit r;
  if (getrlimit(resource, &r) != 0) return soft;
  r.rlim_cur = want == 0 ? RLIM_INFINITY : want;
  return setrlimit(resource, &r) == 0 ? want : soft;
}

}  // namespace

ProcessLimits ReadProcessLimits(const LimitSources& sources) {
  ProcessLimits l;
  if (sources.read_rlimits) {
    struct rlimit r;
    if (getrlimit(RLIMIT_AS, &r) == 0) l.address_space_bytes = Soft(r);
    if (getrlimit(RLIMIT_NOFILE, &r) == 0) {
      l.open_files = Soft(r);
      l.open_files_hard = Hard(r);
    }
    if (getrlimit(RLIMIT_FSIZE, &r) == 0) l.file_size_bytes = Soft(r);
  }
  l.mapped_bytes = ReadVmSize(sources.proc_self_status);
  ReadCgroupMemory(sources, &l);
  return l;
}

Status FitProcessLimits(const LimitNeeds& needs, ProcessLimits* l, bool apply) {
  // Open files: a million at most (select-free code, but each costs kernel
  // memory only when used).
  l->open_files = RaiseSoft(RLIMIT_NOFILE, 1u << 20, apply, l->open_files, l->open_files_hard);
  struct rlimit fsize;
  if (apply && getrlimit(RLIMIT_FSIZE, &fsize) == 0)
    l->file_size_bytes = RaiseSoft(RLIMIT_FSIZE, 0, apply, l->file_size_bytes, Hard(fsize));
  if (l->address_space_bytes > 0 && apply) mallopt(M_ARENA_MAX, 2);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_limits = *l;
    g_published = true;
  }
  if (l->open_files > 0 && l->open_files < needs.open_files)
    return Status::ResourceExhausted("the open-file limit (RLIMIT_NOFILE, ulimit -n) is " +
                                     std::to_string(l->open_files) + " (hard limit " +
                                     (l->open_files_hard ? std::to_string(l->open_files_hard) : "unlimited") +
                                     "), below the " + std::to_string(needs.open_files) +
                                     " Tether needs (connections, data files, checkpoints, logs): raise it "
                                     "(ulimit -n, or the scheduler's or the service's setting)");
  if (l->address_space_bytes > 0 &&
      l->address_space_bytes < l->mapped_bytes + needs.free_address_space_bytes)
    return Status::ResourceExhausted("the address-space limit (RLIMIT_AS, ulimit -v) is " +
                                     FormatBytes(l->address_space_bytes) + ", and this process maps " +
                                     FormatBytes(l->mapped_bytes) + " already: it needs " +
                                     FormatBytes(needs.free_address_space_bytes) +
                                     " more to start; raise the limit (ulimit -v)");
  if (l->cgroup_memory_bytes > 0 &&
      l->cgroup_memory_bytes < l->cgroup_memory_used_bytes + needs.free_memory_bytes)
    return Status::ResourceExhausted("the cgroup memory limit (" + l->cgroup_file + ") is " +
                                     FormatBytes(l->cgroup_memory_bytes) + ", and " +
                                     FormatBytes(l->cgroup_memory_used_bytes) + " of it is in use: " +
                                     FormatBytes(needs.free_memory_bytes) +
                                     " more are needed to start; raise the container's or the job's memory limit");
  if (l->file_size_bytes > 0 && l->file_size_bytes < needs.file_size_bytes)
    return Status::ResourceExhausted("the file-size limit (RLIMIT_FSIZE, ulimit -f) is " +
                                     FormatBytes(l->file_size_bytes) + ", below the " +
                                     FormatBytes(needs.file_size_bytes) +
                                     " a metrics file or a manifest may need: raise it (ulimit -f)");
  return Status::OK();
}

ProcessLimits CurrentProcessLimits() {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_published) return g_limits;
  }
  return ReadProcessLimits();
}

uint64_t LimitedMemoryBytes(const ProcessLimits& l, std::string* source) {
  uint64_t best = 0;
  if (l.cgroup_memory_bytes > 0) {
    best = l.cgroup_memory_bytes > l.cgroup_memory_used_bytes ? l.cgroup_memory_bytes - l.cgroup_memory_used_bytes : 1;
    if (source != nullptr) *source = "the cgroup memory limit (" + l.cgroup_file + ")";
  }
  if (l.address_space_bytes > 0) {
    const uint64_t left = l.address_space_bytes > l.mapped_bytes ? l.address_space_bytes - l.mapped_bytes : 1;
    if (best == 0 || left < best) {
      best = left;
      if (source != nullptr) *source = "the address-space limit (RLIMIT_AS, ulimit -v)";
    }
  }
  return best;
}

uint64_t MemoryCeilingBytes(const ProcessLimits& l, std::string* source, uint64_t physical_bytes) {
  if (physical_bytes == 0) {
    const long pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page_bytes > 0) physical_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_bytes);
  }
  uint64_t best = physical_bytes;
  if (source != nullptr) *source = "physical memory";
  auto lower = [&](uint64_t limit, const std::string& name) {
    if (limit > 0 && (best == 0 || limit < best)) {
      best = limit;
      if (source != nullptr) *source = name;
    }
  };
  lower(l.cgroup_memory_bytes, "the cgroup memory limit (" + l.cgroup_file + ")");
  lower(l.address_space_bytes, "the address-space limit (RLIMIT_AS, ulimit -v)");
  return best;
}

uint64_t ConnectionDescriptorBudget(const ProcessLimits& l, uint64_t reserve) {
  if (l.open_files == 0) return std::numeric_limits<uint32_t>::max();
  return l.open_files > reserve ? l.open_files - reserve : 0;
}

std::string FileSizeLimitNote() {
  struct rlimit r;
  if (getrlimit(RLIMIT_FSIZE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return "";
  return " (the file-size limit RLIMIT_FSIZE, ulimit -f, is " + std::to_string(r.rlim_cur) + " bytes)";
}

}  // namespace tether
