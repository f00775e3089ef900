#include "core/output_path.h"

#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace tether {
namespace {

namespace fs = std::filesystem;

Status Bad(const std::string& source, const std::string& path, const std::string& why) {
  return Status::InvalidArgument(source + "=" + path + ": " + why);
}

// The name of a pseudo file system that takes no new files, or "".
std::string PseudoFileSystem(const std::string& path) {
  struct statfs s {};
  if (statfs(path.c_str(), &s) != 0) return "";
  switch (static_cast<unsigned long>(s.f_type)) {  // NOLINT(runtime/int): statfs's type
    case PROC_SUPER_MAGIC: return "/proc (procfs)";
    case SYSFS_MAGIC: return "sysfs";
    case CGROUP_SUPER_MAGIC:
    case CGROUP2_SUPER_MAGIC: return "a cgroup file system";
    case DEBUGFS_MAGIC: return "debugfs";
    case SECURITYFS_MAGIC: return "securityfs";
    default: return "";
  }
}

}  // namespace

Status CheckWritableDir(const std::string& dir, const std::string& source) {
  if (dir.empty()) return Status::InvalidArgument(source + ": empty path");
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  if (ec) return Bad(source, dir, "cannot resolve the path: " + ec.message());
  // The deepest part of the path that exists decides: a writer makes the rest.
  while (!fs::exists(p, ec) && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
  if (!fs::is_directory(p, ec))
    return Bad(source, dir, p.string() + " is a file, not a directory, so nothing can be made under it");
  if (const std::string pseudo = PseudoFileSystem(p.string()); !pseudo.empty())
    return Bad(source, dir, p.string() + " is on " + pseudo + ", which holds no files of ours: choose a folder on a disk");
  if (access(p.string().c_str(), W_OK) != 0)
    return Bad(source, dir, p.string() + " is not writable by this process (permissions, or a read-only file system)");
  return Status::OK();
}

Status CheckWritableFile(const std::string& path, const std::string& source, bool create_parents,
                         StreamOutput streams) {
  TETHER_ASSIGN_OR_RETURN(const OutputTarget target, ResolveOutputTarget(path, source, streams));
  if (target.write_through) return Status::OK();
  std::error_code ec;
  fs::path parent = fs::absolute(target.path, ec).parent_path();
  if (ec) return Bad(source, path, "cannot resolve the path: " + ec.message());
  if (!create_parents && !fs::is_directory(parent, ec))
    return Bad(source, path, "its folder " + parent.string() + " does not exist");
  if (Status st = CheckWritableDir(parent.string(), source); !st.ok())
    return Bad(source, path, st.message().substr(st.message().find(": ") + 2));
  return Status::OK();
}

std::vector<std::string> RunFilesIn(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".jsonl") out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

Status CheckMetricsDirFresh(const std::string& dir, const std::string& source) {
  const std::vector<std::string> files = RunFilesIn(dir);
  if (files.empty()) return Status::OK();
  std::string list;
  for (size_t i = 0; i < files.size() && i < 3; ++i) list += (i ? ", " : "") + files[i];
  if (files.size() > 3) list += ", ...";
  return Bad(source, dir,
             "already holds a run (" + list +
                 "); a second run appended there would draw as one broken line: give a new folder, or remove "
                 "this one");
}

}  // namespace tether
