#include "core/output_target.h"

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace tether {
namespace {

namespace fs = std::filesystem;

// As many links as Linux follows in one path lookup (MAXSYMLINKS).
constexpr int kMaxLinks = 40;

// The file under folder `dir` (at any depth, links to files followed) that
// is the file `out` describes (device and inode); "" when none is. An
// unreadable subfolder is skipped: the run could not read it either.
std::string FileUnder(const std::string& dir, const struct stat& out) {
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::stat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == out.st_dev &&
        st.st_ino == out.st_ino)
      return it->path().string();
  }
  return "";
}

Status Bad(const std::string& source, const std::string& path, const std::string& why) {
  return Status::InvalidArgument(source + "=" + path + ": " + why);
}

// What is at a path, in words, for a refusal.
std::string KindOf(mode_t mode) {
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// Whether `at` is a link in a /proc descriptor folder (/proc/self/fd/1,
// which /dev/stdout and /dev/fd/1 lead to) whose open file is no regular
// file: a pipe, socket or terminal. Its link text ("pipe:[123]") names no
// path, so it is not followed: the descriptor itself is the output.
bool IsStreamDescriptorLink(const std::string& at) {
  struct statfs fs_info {};
  struct stat st {};
  const std::string dir = fs::path(at).parent_path().string();
  return ::statfs(dir.empty() ? "." : dir.c_str(), &fs_info) == 0 &&
         static_cast<unsigned long>(fs_info.f_type) == PROC_SUPER_MAGIC &&  // NOLINT(runtime/int): statfs's type
         ::stat(at.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

// The descriptor number when `at` is a link in this process's own
// descriptor folder (/proc/self/fd/N, /proc/PID/fd/N, /proc/thread-self/fd/N),
// else -1.
int OwnDescriptor(const std::string& at) {
  const fs::path p(at);
  const std::string name = p.filename().string();
  if (name.empty() || name.size() > 9 || name.find_first_not_of("0123456789") != std::string::npos) return -1;
  std::error_code ec;
  const fs::path dir = fs::canonical(p.parent_path(), ec);
  if (ec || dir.filename() != "fd") return -1;
  const std::string pid = "/proc/" + std::to_string(::getpid());
  const fs::path up = dir.parent_path();
  const bool ours = up == pid || (up.parent_path().filename() == "task" && up.parent_path().parent_path() == pid);
  return ours ? std::stoi(name) : -1;
}

// `path` with every symbolic link at its end followed; the folders on the way
// are left as they are (the kernel follows those when the file is opened).
// A descriptor's link to a pipe, socket or terminal is where it stops.
StatusOr<std::string> FollowLinks(const std::string& path, const std::string& source) {
  std::string at = path;
  for (int hops = 0; hops <= kMaxLinks; ++hops) {
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return at;
    if (IsStreamDescriptorLink(at)) return at;
    std::error_code ec;
    const fs::path target = fs::read_symlink(at, ec);
    if (ec) return Bad(source, path, "cannot read the link " + at + ": " + ec.message());
    at = target.is_absolute() ? target.string() : (fs::path(at).parent_path() / target).lexically_normal().string();
  }
  return Bad(source, path, "more than " + std::to_string(kMaxLinks) + " symbolic links in a row (a loop?)");
}

}  // namespace

StatusOr<OutputTarget> ResolveOutputTarget(const std::string& path, const std::string& source,
                                           StreamOutput streams) {
  if (path.empty()) return Status::InvalidArgument(source + ": empty path");
  OutputTarget out;
  TETHER_ASSIGN_OR_RETURN(out.path, FollowLinks(path, source));
  const std::string shown = out.path == path ? path : path + " (a link to " + out.path + ")";
  struct stat st {};
  if (::stat(out.path.c_str(), &st) != 0) {
    if (errno == ENOENT) return out;
    return Bad(source, shown, std::string("cannot stat it: ") + std::strerror(errno));
  }
  out.exists = true;
  if (S_ISREG(st.st_mode)) return out;
  if (S_ISDIR(st.st_mode)) return Bad(source, shown, "is a directory; give a file name");
  // A socket cannot be opened by name; as this process's open descriptor
  // (/dev/stdout of a job whose output goes to a socket) it is written as is.
  const int fd = OwnDescriptor(out.path);
  if ((S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode) || (S_ISSOCK(st.st_mode) && fd >= 0)) &&
      streams == StreamOutput::kWriteThrough) {
    out.write_through = true;
    out.fd = fd;
    return out;
  }
  const bool stream = S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode);
  return Bad(source, shown,
             "is " + KindOf(st.st_mode) + ", not a regular file; " +
                 (stream ? "this output is written by temporary file and rename, which would replace it"
                         : "nothing is written over it") +
                 ": give a file name");
}

Status CheckOutputNotInput(const std::string& path, const std::string& source,
                           const std::vector<NamedInput>& inputs) {
  struct stat out {};
  if (path.empty() || ::stat(path.c_str(), &out) != 0) return Status::OK();
  // A character device or FIFO written through (/dev/null) is no input's file.
  if (!S_ISREG(out.st_mode)) return Status::OK();
  const std::string refused = ": writing it would destroy an input of this run; give another file name";
  for (const NamedInput& input : inputs) {
    struct stat in {};
    if (input.path.empty() || ::stat(input.path.c_str(), &in) != 0) continue;
    if (S_ISDIR(in.st_mode)) {
      const std::string file = FileUnder(input.path, out);
      if (!file.empty())
        return Status::InvalidArgument(source + "=" + path + " is the same file as " + file + ", under " +
                                       input.source + "=" + input.path + refused);
    } else if (in.st_dev == out.st_dev && in.st_ino == out.st_ino) {
      return Status::InvalidArgument(source + "=" + path + " is the same file as " + input.source + "=" +
                                     input.path + refused);
    }
  }
  return Status::OK();
}

}  // namespace tether
