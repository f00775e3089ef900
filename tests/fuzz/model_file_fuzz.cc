// libFuzzer target for model files (checkpoint/model_file.h): any bytes
// through ParseModelFile, which reads a zip archive as an npz
// (checkpoint/npz_model.h: libzip, the NPY headers) and anything else as
// safetensors, then, when they read, through MakeScorerSet
// (serving/scorer.h), which sizes what scoring allocates from the model's
// config. Nothing may crash, abort, or allocate past libFuzzer's
// -rss_limit_mb: every size a file states (a header, a member's size, an
// NPY shape) is checked against the file and the process's memory first.
// The seeds (tests/fuzz/corpus/model_file_fuzz/) hold one model in both
// formats, the npz both stored and deflated.
#include <cstdint>
#include <string>

#include "checkpoint/model_file.h"
#include "serving/scorer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  tether::StatusOr<tether::ModelFileContents> m = tether::ParseModelFile("fuzz.model", bytes);
  if (!m.ok()) return 0;
  (void)tether::MakeScorerSet(m->model);
  return 0;
}
