// libFuzzer target for model files (checkpoint/model_file.h): the bytes of a
// safetensors file through ParseSafetensorsModel, then, when it reads,
// through MakeScorerSet (serving/scorer.h), which sizes what scoring
// allocates from the model's config. Nothing may crash, abort, or allocate
// past libFuzzer's -rss_limit_mb: every size a file states is checked
// against the file and the process's memory first.
#include <cstdint>
#include <string>

#include "checkpoint/model_file.h"
#include "serving/scorer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  tether::StatusOr<tether::ModelFileContents> m = tether::ParseSafetensorsModel("fuzz.safetensors", bytes);
  if (!m.ok()) return 0;
  (void)tether::MakeScorerSet(m->model);
  return 0;
}
