#include "core/data_files.h"

#include <glob.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>

namespace tether {
namespace {

bool HasGlobChar(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

}  // namespace

bool IsFileList(const std::string& spec) { return spec.find(',') != std::string::npos || HasGlobChar(spec); }

std::vector<std::string> SplitFileList(const std::string& spec) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = spec.find(',', start);
    out.push_back(Trim(spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string ResolveFileList(const std::string& spec, const std::string& base_dir) {
  if (!IsFileList(spec)) {
    if (spec.empty() || std::filesystem::path(spec).is_absolute()) return spec;
    return (std::filesystem::path(base_dir) / spec).lexically_normal().string();
  }
  std::string out;
  for (const std::string& e : SplitFileList(spec)) {
    if (!out.empty()) out += ",";
    out += e.empty() || std::filesystem::path(e).is_absolute()
               ? e
               : (std::filesystem::path(base_dir) / e).lexically_normal().string();
  }
  return out;
}

StatusOr<std::vector<std::string>> ExpandFileList(const std::string& spec, const std::string& field) {
  const std::string where = "config field " + field + ": ";
  if (!IsFileList(spec)) return std::vector<std::string>{spec};
  std::vector<std::string> out;
  std::set<std::string> seen;
  const std::vector<std::string> entries = SplitFileList(spec);
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& e = entries[i];
    if (e.empty())
      return Status::InvalidArgument(where + "entry " + std::to_string(i + 1) + " of '" + spec + "' is empty");
    std::vector<std::string> files;
    if (!HasGlobChar(e)) {
      files.push_back(e);
    } else {
      glob_t g{};
      std::unique_ptr<glob_t, void (*)(glob_t*)> freer(&g, &globfree);
      errno = 0;
      const int rc = glob(e.c_str(), GLOB_ERR, nullptr, &g);
      std::error_code ec;
      const std::filesystem::path dir =
          std::filesystem::absolute(std::filesystem::path(e).parent_path().empty() ? std::filesystem::path(".")
                                                                                    : std::filesystem::path(e).parent_path(),
                                    ec)
              .lexically_normal();
      if (rc == GLOB_NOMATCH)
        return Status::NotFound(where + "the pattern '" + e + "' matches no file (looked in " + dir.string() + ")");
      if (rc != 0)
        return Status::IOError(where + "the pattern '" + e + "' could not be expanded (reading " + dir.string() +
                               (errno != 0 ? std::string(": ") + std::strerror(errno) : std::string()) + ")");
      for (size_t k = 0; k < g.gl_pathc; ++k) files.emplace_back(g.gl_pathv[k]);  // sorted by glob(3)
    }
    for (std::string& f : files) {
      // The same file under two names (a symbolic link, ../x): compared by
      // its canonical path where it exists, else by its text.
      std::error_code canon_ec;
      std::filesystem::path canon = std::filesystem::weakly_canonical(f, canon_ec);
      const std::string key =
          canon_ec ? std::filesystem::path(f).lexically_normal().string() : canon.string();
      if (!seen.insert(key).second)
        return Status::InvalidArgument(where + "'" + spec + "' names '" + f +
                                       "' twice: its rows would be read twice each epoch");
      out.push_back(std::move(f));
    }
  }
  return out;
}

}  // namespace tether
