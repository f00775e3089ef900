// A test's own files, read and written whole, and their modification time
// set: the helpers the file-format and data-file tests share.
//
// Errors: ReadFileBytes returns "" for a file it cannot open; SetMtime fails
// the current test (ASSERT). Thread-safety: none needed; each test uses its
// own files.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace tether::testing {

inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Replaces `path`'s contents with `bytes`.
inline void WriteFileBytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

/// Sets `path`'s access and modification times to `seconds` since the epoch.
inline void SetMtime(const std::string& path, int64_t seconds) {
  struct timespec t[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), t, 0), 0) << path;
}

}  // namespace tether::testing
