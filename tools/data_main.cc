// tether-data: checks a data file by reading it exactly as training does
// (same reader, same options), then prints what training would see.
//
//   tether-data check --format=xmc|libsvm --index_base=0|1 [flags] FILE
//
// Prints rows, features, labels, nnz and the unlabeled/dropped counts and
// exits 0, or prints the reader's error ("FILE:line: ...") and exits 1.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "core/status.h"
#include "sparse/reader.h"
#include "tools/flag_parser.h"

DEFINE_string(format, "", "Data format, required: xmc or libsvm");
DEFINE_int32(index_base, -1,
             "Index base, required: 0 or 1. Applies to feature indices and to XMC label ids; "
             "never guessed from the data");
DEFINE_int64(num_features, 0,
             "Feature dimension; 0 = from the XMC header, or (LIBSVM) the largest index seen");
DEFINE_int64(num_labels, 0,
             "Label dimension; 0 = from the XMC header, or (LIBSVM multilabel) the largest id seen");
DEFINE_string(split, "",
              "Optional split file (one 1-based row index per line): check only those rows");
DEFINE_int32(partition, 0, "This reader's share, in [0, num_partitions)");
DEFINE_int32(num_partitions, 1, "Number of shares the rows are split into (byte ranges, or "
                                "blocks of --split)");
DEFINE_string(duplicates, "error",
              "A feature index repeated on one line: error, sum, or keep_last");
DEFINE_string(non_finite, "error",
              "NaN, inf or overflowing values: error, or drop_row (drop and count the row)");
DEFINE_bool(header_mismatch_is_error, true,
            "XMC: stop when the header's example count disagrees with the body (else warn)");
DEFINE_bool(skip_unlabeled, false,
            "Leave out rows with no labels (default: keep them as all-negative rows)");

namespace tether {
namespace {

// The one place where flags become ReadOptions.
StatusOr<ReadOptions> OptionsFromFlags() {
  ReadOptions o;
  if (FLAGS_format == "xmc") {
    o.format = DataFormat::kXmc;
  } else if (FLAGS_format == "libsvm") {
    o.format = DataFormat::kLibsvm;
  } else {
    return Status::InvalidArgument("--format must be xmc or libsvm, got '" + FLAGS_format + "'");
  }
  if (FLAGS_index_base != 0 && FLAGS_index_base != 1) {
    return Status::InvalidArgument("--index_base must be 0 or 1, got " +
                                   std::to_string(FLAGS_index_base) +
                                   (FLAGS_index_base == -1 ? " (unset; it is required)" : ""));
  }
  o.index_base = FLAGS_index_base;
  o.num_features = FLAGS_num_features;
  o.num_labels = FLAGS_num_labels;
  o.partition = FLAGS_partition;
  o.num_partitions = FLAGS_num_partitions;
  if (FLAGS_duplicates == "error") {
    o.duplicates = DuplicatePolicy::kError;
  } else if (FLAGS_duplicates == "sum") {
    o.duplicates = DuplicatePolicy::kSum;
  } else if (FLAGS_duplicates == "keep_last") {
    o.duplicates = DuplicatePolicy::kKeepLast;
  } else {
    return Status::InvalidArgument("--duplicates must be error, sum or keep_last, got '" +
                                   FLAGS_duplicates + "'");
  }
  if (FLAGS_non_finite == "error") {
    o.non_finite = NonFinitePolicy::kError;
  } else if (FLAGS_non_finite == "drop_row") {
    o.non_finite = NonFinitePolicy::kDropRow;
  } else {
    return Status::InvalidArgument("--non_finite must be error or drop_row, got '" +
                                   FLAGS_non_finite + "'");
  }
  o.header_mismatch_is_error = FLAGS_header_mismatch_is_error;
  o.skip_unlabeled = FLAGS_skip_unlabeled;
  return o;
}

int Check(const std::string& path) {
  StatusOr<ReadOptions> opts = OptionsFromFlags();
  if (!opts.ok()) {
    std::fprintf(stderr, "tether-data: %s\n", opts.status().message().c_str());
    return 1;
  }
  LOG(INFO) << "tether-data check: file=" << path << " format=" << FLAGS_format
            << " index_base=" << FLAGS_index_base << " num_features=" << FLAGS_num_features
            << " num_labels=" << FLAGS_num_labels << " split='" << FLAGS_split
            << "' partition=" << FLAGS_partition << "/" << FLAGS_num_partitions
            << " duplicates=" << FLAGS_duplicates << " non_finite=" << FLAGS_non_finite
            << " header_mismatch_is_error=" << FLAGS_header_mismatch_is_error
            << " skip_unlabeled=" << FLAGS_skip_unlabeled;
  std::vector<int64_t> subset;
  if (!FLAGS_split.empty()) {
    StatusOr<std::vector<int64_t>> rows = ReadSplitFile(FLAGS_split);
    if (!rows.ok()) {
      std::fprintf(stderr, "tether-data: %s\n", rows.status().message().c_str());
      return 1;
    }
    subset = std::move(rows).value();
    opts->row_subset = &subset;
  }
  const auto t0 = std::chrono::steady_clock::now();
  StatusOr<Dataset> ds = ReadDataset(path, *opts);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!ds.ok()) {
    std::fprintf(stderr, "tether-data: %s\n", ds.status().message().c_str());
    return 1;
  }
  std::printf("file: %s\n", path.c_str());
  std::printf("format: %s\nindex_base: %d\n", FLAGS_format.c_str(), FLAGS_index_base);
  if (!FLAGS_split.empty()) std::printf("split: %s\n", FLAGS_split.c_str());
  if (FLAGS_num_partitions > 1) {
    std::printf("partition: %d/%d\n", FLAGS_partition, FLAGS_num_partitions);
  }
  std::printf("rows: %lld\n", static_cast<long long>(ds->features.rows));
  std::printf("features: %lld\n", static_cast<long long>(ds->features.cols));
  std::printf("labels: %lld\n", static_cast<long long>(ds->labels.cols));
  std::printf("nnz: %lld\n", static_cast<long long>(ds->features.nnz()));
  std::printf("label_nnz: %lld\n", static_cast<long long>(ds->labels.nnz()));
  if (!ds->targets.empty()) std::printf("targets: %zu\n", ds->targets.size());
  std::printf("rows_read: %lld\n", static_cast<long long>(ds->rows_read));
  std::printf("unlabeled: %lld (%s)\n", static_cast<long long>(ds->unlabeled_rows),
              FLAGS_skip_unlabeled ? "skipped" : "kept as all-negative");
  std::printf("dropped: %lld\n", static_cast<long long>(ds->dropped_rows));
  if (ds->qid_rows > 0) std::printf("qid: %lld (ignored)\n", static_cast<long long>(ds->qid_rows));
  std::printf("load_ms: %.1f\n", ms);
  return 0;
}

}  // namespace
}  // namespace tether

int main(int argc, char** argv) {
  const tether::CommandLine command_line{
      "tether-data check --format=xmc|libsvm --index_base=0|1 [--num_features=N] FILE\n"
      "Checks a data file by reading it exactly as training does.",
      {"COMMAND", "FILE"}};
  tether::ParseFlagsOrDie(&argc, &argv, command_line);
  if (std::string(argv[1]) != "check") {
    std::fprintf(stderr, "error: unknown command '%s' (the command is check; usage: %s)\n", argv[1],
                 command_line.usage.c_str());
    return 1;
  }
  return tether::Check(argv[2]);
}
