// ScopedTempDir: a fresh directory for one test's files, under
// $TEST_TMPDIR, else $TMPDIR, else /tmp, removed
// with everything in it when the object goes out of scope. Tests write only
// here, so a suite run leaves nothing behind and two runs never collide.
//
// Ownership: the object owns the directory tree. Thread-safety: none needed;
// each test makes its own.
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include <gtest/gtest.h>

namespace tether::testing {

class ScopedTempDir {
 public:
  ScopedTempDir() {
    // gtest 1.12's TempDir() reads $TEST_TMPDIR but not $TMPDIR: honour
    // both, as mktemp does.
    const char* tmpdir = std::getenv("TMPDIR");
    std::string tmpl = std::getenv("TEST_TMPDIR") == nullptr && tmpdir != nullptr && *tmpdir != '\0'
                           ? std::string(tmpdir)
                           : ::testing::TempDir();
    if (tmpl.empty() || tmpl.back() != '/') tmpl += '/';
    tmpl += "tether_test.XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp " << tmpl << " failed";
    path_ = tmpl;
  }
  ~ScopedTempDir() {
    std::error_code ignored;  // a failure to clean up must not fail the test
    std::filesystem::remove_all(path_, ignored);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }
  /// path()/name.
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace tether::testing
