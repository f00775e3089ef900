#include "checkpoint/checked_file.h"

#include <fstream>
#include <memory>

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
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::NotFound(path + ": missing, but " + (manifest ? "the checkpoint's MANIFEST" : says) + " lists it");
  // The size is checked before the file is read whole.
  in.seekg(0, std::ios::end);
  const uint64_t on_disk = static_cast<uint64_t>(in.tellg());
  if (on_disk != expected.bytes())
    return Status::DataLoss(path + ": " + std::to_string(on_disk) + " bytes on disk, but " + says + " says " +
                            std::to_string(expected.bytes()) + " (a truncated or replaced file)");
  in.seekg(0);
  std::string bytes(on_disk, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (static_cast<uint64_t>(in.gcount()) != on_disk) return Status::IOError(path + ": read error");
  const uint64_t sum = checkpoint_internal::ChecksumOf(bytes.data(), bytes.size());
  if (sum != expected.xxh3())
    return Status::DataLoss(path + ": checksum mismatch: XXH3-64 " + ChecksumHex(sum) + ", " + says + " says " +
                            ChecksumHex(expected.xxh3()) + " (the file is corrupt)");
  return bytes;
}

}  // namespace tether
