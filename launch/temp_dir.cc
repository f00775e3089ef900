#include "launch/temp_dir.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <glog/logging.h>

#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "launch/process_table.h"

namespace tether {

std::string ProcessStartTime(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) return "";
  std::istringstream fields(stat.substr(paren + 1));
  std::string f;
  for (int i = 3; i <= 22 && fields >> f; ++i) {
    if (i == 22) return f;
  }
  return "";
}

void RemoveDeadLaunchersTempDirs(const std::string& parent) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("tether-launch.", 0) != 0) continue;
    struct stat st {};
    if (lstat(entry.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid()) continue;
    std::ifstream owner(entry.path() / "owner");
    long pid = 0;
    std::string started;
    if (!(owner >> pid >> started) || pid <= 0) continue;
    const bool alive = kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
    if (alive && ProcessStartTime(static_cast<pid_t>(pid)) == started) continue;
    std::error_code rm;
    std::filesystem::remove_all(entry.path(), rm);
    if (rm) {
      LOG(WARNING) << "[launch] could not remove " << entry.path().string() << ", left by launcher pid " << pid
                   << " (gone): " << rm.message();
    } else {
      LOG(INFO) << "[launch] removed " << entry.path().string() << ", left by launcher pid " << pid
                << ", which is gone";
    }
  }
}

std::string LaunchTempParent() {
  const char* tmpdir = std::getenv("TMPDIR");
  return tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
}

Status CheckLaunchTempParent() {
  const std::string parent = LaunchTempParent();
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string named = tmpdir != nullptr && *tmpdir != '\0' ? "TMPDIR=" + parent : parent + " (TMPDIR unset)";
  const std::string fix = "; set TMPDIR to a writable folder";
  struct stat st {};
  if (stat(parent.c_str(), &st) != 0) {
    const int err = errno;
    return Status::InvalidArgument(named + (err == ENOENT || err == ENOTDIR ? ": no such folder"
                                                                            : ": cannot stat: " + std::string(std::strerror(err))) +
                                   fix);
  }
  if (!S_ISDIR(st.st_mode)) return Status::InvalidArgument(named + ": is not a folder" + fix);
  if (access(parent.c_str(), W_OK | X_OK) != 0)
    return Status::InvalidArgument(named + ": cannot write there (" + std::strerror(errno) + ")" + fix);
  return Status::OK();
}

StatusOr<std::string> MakeLaunchTempDir() {
  const std::string parent = LaunchTempParent();
  RemoveDeadLaunchersTempDirs(parent);
  std::string dir = parent + "/tether-launch." + std::to_string(getpid()) + ".XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) return Status::IOError(ErrnoText("mkdtemp " + dir));
  std::ofstream owner(dir + "/owner");
  owner << getpid() << " " << ProcessStartTime(getpid()) << "\n";
  if (!owner) {
    const Status st = Status::IOError(ErrnoText("cannot write " + dir + "/owner"));
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return st;
  }
  return dir;
}

}  // namespace tether
