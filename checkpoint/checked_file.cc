#include "checkpoint/checked_file.h"

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
}  // namespace tether
