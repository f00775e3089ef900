// tether-gen-xmc: writes a synthetic XMC train/test pair with power-law
// label frequencies (input/synthetic_xmc.h), in the Extreme Classification
// Repository text format that tether-worker reads.
//
//   tether-gen-xmc --shape=amazon670k --out_prefix=build/synthetic/amazon670k
//   → build/synthetic/amazon670k.train.txt, build/synthetic/amazon670k.test.txt
#include <gflags/gflags.h>

#include <chrono>
#include <cstdio>

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

int main(int argc, char** argv) {
  tether::ParseFlagsOrDie(&argc, &argv,
                          {"tether-gen-xmc --out_prefix=PREFIX [--shape=amazon670k] [flags]\n"
                           "Writes a synthetic XMC train/test pair with power-law label frequencies."});
  if (FLAGS_out_prefix.empty()) {
    std::fprintf(stderr, "error: flag --out_prefix is required (usage: %s)\n", gflags::ProgramUsage());
    return 2;
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
