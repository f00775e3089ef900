#include "core/env.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/file_util.h"

namespace tether {
namespace {

class PosixAtomicFile : public WritableFile {
 public:
  explicit PosixAtomicFile(AtomicFile file) : file_(std::move(file)) {}
  Status Append(std::string_view bytes) override { return file_.Append(bytes); }
  Status Commit() override { return file_.Commit(); }
  void Abandon() { file_.LeaveTemporary(); }

 private:
  AtomicFile file_;
};

class PosixFileSystem : public FileSystem {
 public:
  StatusOr<std::unique_ptr<WritableFile>> NewAtomicFile(const std::string& path) override {
    TETHER_ASSIGN_OR_RETURN(AtomicFile f, AtomicFile::Create(path));
    return std::unique_ptr<WritableFile>(new PosixAtomicFile(std::move(f)));
  }
  Status CreateDirs(const std::string& path) override {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) return Status::IOError(path + ": cannot create the directory: " + ec.message());
    return Status::OK();
  }
  Status RemoveAll(const std::string& path) override {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
    if (ec) return Status::IOError(path + ": cannot remove: " + ec.message());
    return Status::OK();
  }
};

}  // namespace

FileSystem* FileSystem::Default() {
  static FileSystem* fs = new PosixFileSystem();
  return fs;
}

class FaultInjectingFileSystem::File : public WritableFile {
 public:
  File(FaultInjectingFileSystem* fs, std::unique_ptr<WritableFile> base) : fs_(fs), base_(std::move(base)) {}
  ~File() override {
    // A dead process cleans nothing up: keep the temporary file.
    if (fs_->dead_)
      if (auto* p = dynamic_cast<PosixAtomicFile*>(base_.get())) p->Abandon();
  }
  Status Append(std::string_view bytes) override {
    TETHER_RETURN_IF_ERROR(fs_->Dead());
    const uint64_t left = fs_->budget_ - fs_->written_;
    if (bytes.size() > left) {
      (void)base_->Append(bytes.substr(0, left));
      fs_->written_ += left;
      fs_->dead_ = true;
      return fs_->Dead();
    }
    fs_->written_ += bytes.size();
    return base_->Append(bytes);
  }
  Status Commit() override {
    TETHER_RETURN_IF_ERROR(fs_->Dead());
    return base_->Commit();
  }

 private:
  FaultInjectingFileSystem* fs_;
  std::unique_ptr<WritableFile> base_;
};

Status FaultInjectingFileSystem::Dead() const {
  if (!dead_) return Status::OK();
  return Status::IOError("injected fault after " + std::to_string(budget_) + " bytes");
}

StatusOr<std::unique_ptr<WritableFile>> FaultInjectingFileSystem::NewAtomicFile(const std::string& path) {
  TETHER_RETURN_IF_ERROR(Dead());
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, base_->NewAtomicFile(path));
  return std::unique_ptr<WritableFile>(new File(this, std::move(f)));
}

Status FaultInjectingFileSystem::CreateDirs(const std::string& path) {
  TETHER_RETURN_IF_ERROR(Dead());
  return base_->CreateDirs(path);
}

Status FaultInjectingFileSystem::RemoveAll(const std::string& path) {
  TETHER_RETURN_IF_ERROR(Dead());
  return base_->RemoveAll(path);
}

}  // namespace tether
