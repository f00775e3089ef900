#include "checkpoint/checked_file.h"

#include <unistd.h>

#include <memory>
#include <utility>

#include "core/regular_file.h"

namespace tether {
namespace checkpoint_internal {

uint64_t ChecksumOf(const void* p, size_t n) { return XXH3_64bits(p, n); }

const CheckpointFile* FindFile(const CheckpointManifest& m, const std::string& name) {
  for (const CheckpointFile& f : m.files())
    if (f.name() == name) return &f;
  return nullptr;
}

Status WriteSmallFile(FileSystem* fs, const std::string& path, const std::string& bytes, CheckpointFile* written,
                      const std::string& name) {
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f, fs->NewAtomicFile(path));
  CheckedWriter w(f.get());
  TETHER_RETURN_IF_ERROR(w.Append(bytes.data(), bytes.size()));
  TETHER_RETURN_IF_ERROR(f->Commit());
  if (written != nullptr) {
    written->set_name(name);
    written->set_bytes(w.bytes());
    written->set_xxh3(w.checksum());
  }
  return Status::OK();
}

}  // namespace checkpoint_internal

Status WriteListedFile(FileSystem* fs, const std::string& ckpt_dir, const std::string& name,
                       const std::string& bytes, CheckpointFile* written) {
  TETHER_RETURN_IF_ERROR(fs->CreateDirs(ckpt_dir));
  return checkpoint_internal::WriteSmallFile(fs, CheckpointJoinPath(ckpt_dir, name), bytes, written, name);
}

StatusOr<std::string> ReadListedFile(const std::string& ckpt_dir, const CheckpointFile& expected, FileLister lister) {
  const bool manifest = lister == FileLister::kManifest;
  const std::string says = manifest ? "the manifest" : "the worker's state file";
  const std::string path = CheckpointJoinPath(ckpt_dir, expected.name());
  // Opened without blocking and checked on the descriptor then read: a
  // FIFO or a device put in the checkpoint never hangs the reader.
  StatusOr<RegularFile> file = OpenRegularFile(path, "");
  if (file.status().code() == Status::Code::kNotFound)
    return Status::NotFound(path + ": missing, but " + (manifest ? "the checkpoint's MANIFEST" : says) + " lists it");
  if (!file.ok()) return file.status();
  const auto mismatch = [&](const std::string& on_disk) {
    return Status::DataLoss(path + ": " + on_disk + " bytes on disk, but " + says + " says " +
                            std::to_string(expected.bytes()) + " (a truncated or replaced file)");
  };
  // The size is checked before the file is read whole.
  if (file->bytes != expected.bytes()) {
    ::close(file->fd);
    return mismatch(std::to_string(file->bytes));
  }
  StatusOr<std::string> read = ReadOpenedFile(*file, expected.bytes(), path, "");
  // Past the bound only when the file grew while it was read.
  if (read.status().code() == Status::Code::kInvalidArgument)
    return mismatch("more than " + std::to_string(expected.bytes()));
  if (!read.ok()) return read.status();
  const std::string& bytes = *read;
  if (bytes.size() != expected.bytes()) return mismatch(std::to_string(bytes.size()));
  const uint64_t sum = checkpoint_internal::ChecksumOf(bytes.data(), bytes.size());
  if (sum != expected.xxh3())
    return Status::DataLoss(path + ": checksum mismatch: XXH3-64 " + ChecksumHex(sum) + ", " + says + " says " +
                            ChecksumHex(expected.xxh3()) + " (the file is corrupt)");
  return std::move(read).value();
}

}  // namespace tether
