// libFuzzer target for checkpoint manifests (checkpoint/checkpoint.h): the
// input is a manifest's text without its checksum line, which the target
// appends (so that the parse is reached), then ParseManifest and
// CheckManifestSizes. The first byte, when odd, leaves the checksum line off
// or wrong instead. Nothing may crash or abort.
#include <cstdint>
#include <string>

#include <xxhash.h>

#include "checkpoint/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if ((data[0] & 1) == 0) text += "# xxh3 " + tether::ChecksumHex(XXH3_64bits(text.data(), text.size())) + "\n";
  tether::StatusOr<tether::CheckpointManifest> m = tether::ParseManifest("MANIFEST", text);
  if (m.ok()) (void)tether::CheckManifestSizes("MANIFEST", *m);
  return 0;
}
