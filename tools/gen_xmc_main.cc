// tether-gen-xmc: writes a synthetic XMC train/test pair with power-law
// label frequencies (input/synthetic_xmc.h), in the Extreme Classification
// Repository text format that tether-worker reads.
//
//   tether-gen-xmc --shape=amazon670k --out_prefix=build/synthetic/amazon670k
//   → build/synthetic/amazon670k.train.txt, build/synthetic/amazon670k.test.txt
//
// With --stream_files=N it writes N training files whose vocabulary drifts
// (input/drifting_xmc.h), PREFIX.train.000.txt …, and PREFIX.test.txt:
//
//   tether-gen-xmc --feature_id_bits=64 --stream_files=10 --new_id_share=0.1 --out_prefix=build/drift/d
#include <gflags/gflags.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "input/drifting_xmc.h"
#include "input/synthetic_xmc.h"
#include "cli/flag_parser.h"

DEFINE_string(shape, "", "preset shape: eurlex4k | wiki10-31k | amazon670k (flags below override it)");
DEFINE_string(out_prefix, "", "write PREFIX.train.txt and PREFIX.test.txt (required)");
DEFINE_int64(train_rows, -1, "training rows (default: the shape's, else 10000)");
DEFINE_int64(test_rows, -1, "test rows (default: the shape's, else 2000)");
DEFINE_int64(num_features, -1, "F (default: the shape's, else 5000)");
DEFINE_int64(num_labels, -1, "L (default: the shape's, else 4000)");
DEFINE_double(features_per_row, -1, "mean feature draws per row (default: the shape's, else 75)");
DEFINE_double(labels_per_row, -1, "mean labels per row (default: the shape's, else 5)");
DEFINE_double(label_exponent, 1.0, "power-law exponent of label frequencies (0 = uniform)");
DEFINE_double(feature_exponent, 1.0, "power-law exponent of background feature frequencies");
DEFINE_int64(features_per_label, 20, "feature ids in each label's signature");
DEFINE_double(signal_fraction, 0.6, "share of feature draws taken from the row's label signatures");
DEFINE_uint64(seed, 1, "random seed");
DEFINE_int32(feature_id_bits, 32,
             "32: feature ids 0..F-1; 64: the F features are written as distinct ids spread over the whole "
             "64-bit range, deterministic by --seed (for data.hashed_features: true)");
DEFINE_int32(stream_files, 0,
             "0: one training file; N >= 1: N training files PREFIX.train.000.txt ... (--train_rows over all of "
             "them) whose feature ids drift by --new_id_share (needs --feature_id_bits=64)");
DEFINE_double(new_id_share, 0.1,
              "with --stream_files: the share of each file's distinct feature ids (after the first file) that no "
              "earlier file holds, in [0, 1)");

namespace {

// --stream_files: the drifting stream, one line per file written.
int WriteStream(const tether::SyntheticXmcOptions& o, int64_t train, int64_t test) {
  tether::DriftingStreamOptions s;
  s.files = FLAGS_stream_files;
  s.train_rows = train;
  s.test_rows = test;
  s.new_id_share = FLAGS_new_id_share;
  tether::Status st = tether::ValidateDriftingStream(o, s);
  if (!st.ok()) {
    std::fprintf(stderr, "tether-gen-xmc: %s (flags --stream_files, --new_id_share, --feature_id_bits)\n",
                 st.message().c_str());
    return 2;
  }
  auto files = tether::DriftingXmcStream(o, s).Write(FLAGS_out_prefix);
  if (!files.ok()) {
    std::fprintf(stderr, "tether-gen-xmc: %s\n", files.status().message().c_str());
    return 1;
  }
  for (const tether::DriftingFileStats& f : *files) {
    std::printf("tether-gen-xmc: wrote %s: %lld rows, %lld distinct feature ids, %lld new (%.1f%%)\n",
                f.path.c_str(), static_cast<long long>(f.rows), static_cast<long long>(f.distinct_ids),
                static_cast<long long>(f.new_ids), 100.0 * static_cast<double>(f.new_ids) /
                                                     static_cast<double>(std::max<int64_t>(1, f.distinct_ids)));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tether::ParseFlagsOrDie(&argc, &argv,
                          {"tether-gen-xmc --out_prefix=PREFIX [--shape=amazon670k] [flags]\n"
                           "Writes a synthetic XMC train/test pair with power-law label frequencies."});
  if (FLAGS_out_prefix.empty()) {
    std::fprintf(stderr, "error: flag --out_prefix is required (usage: %s)\n", gflags::ProgramUsage());
    return 2;
  }
  // -1 is "not given" (the shape's or the built-in size); a size given as
  // 0 or below is refused rather than silently replaced by the default.
  for (const char* flag : {"train_rows", "test_rows", "num_features", "num_labels", "features_per_row",
                           "labels_per_row"}) {
    const gflags::CommandLineFlagInfo info = gflags::GetCommandLineFlagInfoOrDie(flag);
    if (!info.is_default && !(std::stod(info.current_value) > 0)) {
      std::fprintf(stderr, "tether-gen-xmc: flag --%s=%s: must be > 0 (leave it out for the shape's or the default)\n",
                   flag, info.current_value.c_str());
      return 2;
    }
  }
  tether::SyntheticXmcOptions o;
  int64_t train = 10000, test = 2000;
  o.features_per_row = 75;
  o.labels_per_row = 5;
  if (!FLAGS_shape.empty()) {
    tether::Status st = tether::ApplySyntheticShape(FLAGS_shape, &o, &train, &test);
    if (!st.ok()) {
      std::fprintf(stderr, "tether-gen-xmc: flag --shape: %s\n", st.message().c_str());
      return 2;
    }
  }
  if (FLAGS_train_rows >= 0) train = FLAGS_train_rows;
  if (FLAGS_test_rows >= 0) test = FLAGS_test_rows;
  if (FLAGS_num_features > 0) o.num_features = FLAGS_num_features;
  if (FLAGS_num_labels > 0) o.num_labels = FLAGS_num_labels;
  if (FLAGS_features_per_row > 0) o.features_per_row = FLAGS_features_per_row;
  if (FLAGS_labels_per_row > 0) o.labels_per_row = FLAGS_labels_per_row;
  o.label_exponent = FLAGS_label_exponent;
  o.feature_exponent = FLAGS_feature_exponent;
  o.features_per_label = FLAGS_features_per_label;
  o.signal_fraction = FLAGS_signal_fraction;
  o.seed = FLAGS_seed;
  o.feature_id_bits = FLAGS_feature_id_bits;
  tether::Status st = tether::ValidateSyntheticXmcOptions(o);
  if (!st.ok()) {
    std::fprintf(stderr, "tether-gen-xmc: %s\n", st.message().c_str());
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  if (FLAGS_stream_files != 0) {
    const int rc = WriteStream(o, train, test);
    if (rc == 0) {
      std::printf("tether-gen-xmc: %.1f s\n",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    return rc;
  }
  tether::SyntheticXmcGenerator gen(o);
  for (const auto& [rows, suffix] : {std::pair<int64_t, const char*>{train, ".train.txt"}, {test, ".test.txt"}}) {
    const std::string path = FLAGS_out_prefix + suffix;
    st = gen.WriteXmcFile(rows, path);
    if (!st.ok()) {
      std::fprintf(stderr, "tether-gen-xmc: %s\n", st.message().c_str());
      return 1;
    }
    std::printf("tether-gen-xmc: wrote %s: %lld rows, %lld features%s, %lld labels\n", path.c_str(),
                static_cast<long long>(rows), static_cast<long long>(o.num_features),
                o.feature_id_bits == 64 ? " (64-bit ids)" : "", static_cast<long long>(o.num_labels));
  }
  std::printf("tether-gen-xmc: %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}
