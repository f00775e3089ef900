// A stream of synthetic XMC training files whose vocabulary drifts, for
// tables that must live within a memory budget: in every file after the
// first, a stated share of the file's distinct feature ids has never
// appeared in an earlier file, and new ids carry signal.
//
// Model. Rows come from SyntheticXmcGenerator (input/synthetic_xmc.h); each
// generator feature is written as its current id, which starts as the
// feature itself and changes when the feature is renamed (from then on,
// in every later file). Once file t ≥ 1 is drawn, with D distinct ids of
// which N are new by chance (the long tail of background features and
// labels not met yet), the stream makes exactly k = round(new_id_share · D)
// new:
//  - N < k: k − N ids the file shares with earlier files are renamed to
//    fresh ids, signature features of the file's labels first, so new ids
//    carry signal: later files and the test rows use them too, the old id
//    retires (new users, words or items replace old ones);
//  - N > k: N − k of the chance-new ids are folded onto ids of earlier files
//    that this file lacks (the long tail folds onto the known vocabulary).
// Renaming keeps D (no two ids of a file meet), so the share is exact unless
// a file lacks the ids to rename or fold (the first files of a stream much
// smaller than F); DriftingFileStats says what each file holds. A row in
// which two features come to share an id keeps one, with their values
// summed and the row scaled back to unit L2 norm. The test file is drawn
// after the last training file, with the ids as they stand then.
//
// Feature ids are 64-bit (feature_id_bits 64, read with
// data.hashed_features): fresh ids extend the generator's features past F,
// which a 32-bit file's header could not announce. Files:
// PREFIX.train.000.txt … (zero-padded to one width of three digits or more,
// so a glob lists them in order) and PREFIX.test.txt, each written
// atomically.
//
// Deterministic for a given seed and options. Memory: one file's rows, the
// ids written so far and one map entry per renamed or folded feature.
// Thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "input/synthetic_xmc.h"

namespace tether {

struct DriftingStreamOptions {
  int files = 10;              // training files (>= 2 when new_id_share > 0)
  int64_t train_rows = 10000;  // over all training files (>= files); the first files take the remainder
  int64_t test_rows = 2000;    // >= 1
  double new_id_share = 0.1;   // share of each later file's distinct ids that are new, [0, 1)
};

/// What one written file holds.
struct DriftingFileStats {
  std::string path;
  int64_t rows = 0;
  int64_t distinct_ids = 0;  // distinct feature ids in the file
  int64_t new_ids = 0;       // of those, ids no earlier file of the stream holds
};

/// Errors: InvalidArgument naming the first option out of range (the
/// generator's as ValidateSyntheticXmcOptions; feature_id_bits must be 64).
Status ValidateDriftingStream(const SyntheticXmcOptions& generator, const DriftingStreamOptions& stream);

class DriftingXmcStream {
 public:
  /// Both option sets must have passed ValidateDriftingStream (CHECK).
  DriftingXmcStream(const SyntheticXmcOptions& generator, const DriftingStreamOptions& stream);

  /// Writes the training files then the test file under `prefix`; returns
  /// one entry per file, in that order. Errors: IOError naming the path;
  /// ResourceExhausted when fresh ids would pass 2^32 − 1 generator features.
  StatusOr<std::vector<DriftingFileStats>> Write(const std::string& prefix);

 private:
  struct Row {
    std::vector<uint32_t> labels, features;
    std::vector<float> values;
  };
  /// Renames or folds ids of file `file`'s rows until round(new_id_share · D)
  /// of its D distinct ids are new.
  Status Drift(int file, const std::string& path, std::vector<Row>* rows);
  /// Writes each feature as its current id (merging features that meet).
  void ApplyRenames(std::vector<Row>* rows) const;
  uint32_t CurrentId(uint32_t f) const;
  Status WriteRows(const std::vector<Row>& rows, const std::string& path);

  SyntheticXmcOptions gen_options_;
  DriftingStreamOptions options_;
  SyntheticXmcGenerator gen_;
  uint64_t next_fresh_;                            // the next generator feature never written: F, F + 1, …
  std::vector<uint32_t> seen_;                     // ids written so far, ascending
  std::unordered_map<uint32_t, uint32_t> rename_;  // a retired id → the id written in its place
};

}  // namespace tether
