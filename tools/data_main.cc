// tether-data: data files, read exactly as training reads them (same
// readers, same options).
//
//   tether-data check [--format=xmc|libsvm|arff] [--index_base=0|1] [flags] FILE
//     Prints rows, features, labels, nnz and the unlabeled/dropped counts.
//   tether-data stats [same flags] FILE
//     Rows, features, labels, non-zeros per row (min/mean/max), labels per
//     row, label frequency quantiles.
//   tether-data convert --in=F --out=G --to=xmc|libsvm|arff [same flags]
//     Writes F in another format (input/data_writer.h); G is written under a
//     temporary name and renamed when complete, so an error leaves no G.
//
// --format may be left out for names ending in .arff or .arff.gz. Exit 0, or
// the error ("FILE:line: ...") on stderr and exit 1; convert exits 2, before
// reading, when an output is one of its inputs (--in, --split, --label_xml)
// or --to=arff's two outputs are one file.
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "core/job_inputs.h"
#include "core/status.h"
#include "input/arff_reader.h"
#include "input/data_writer.h"
#include "input/reader.h"
#include "cli/flag_parser.h"

DEFINE_string(format, "", "Input format: xmc, libsvm or arff, in any case (may be left out for *.arff and *.arff.gz)");
DEFINE_int32(index_base, -1,
             "Index base, required for xmc and libsvm: 0 or 1. Applies to feature indices and to XMC label "
             "ids; never guessed from the data (ARFF indices are 0-based)");
DEFINE_string(label_xml, "", "ARFF input: MULAN's label XML file naming the label attributes");
DEFINE_string(in, "", "convert: the input file");
DEFINE_string(out, "", "convert: the output file (gzip-compressed when it ends in .gz)");
DEFINE_string(to, "", "convert: the output format, xmc, libsvm or arff");
DEFINE_int32(out_index_base, -1, "convert: index base written (default: 0 for xmc, 1 for libsvm)");
DEFINE_string(out_xml, "", "convert --to=arff: where the label XML goes (default: OUT with .arff[.gz] "
                           "replaced by .xml)");
DEFINE_string(relation, "", "convert --to=arff: the @relation name (default: the input's, or 'tether')");
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
DEFINE_bool(hashed_features, false,
            "XMC and LIBSVM: feature ids are hashed 64-bit integers (as the config's data.hashed_features); "
            "the XMC header's feature count is not used");
DEFINE_bool(skip_unlabeled, false,
            "Leave out rows with no labels (default: keep them as all-negative rows)");

namespace tether {
namespace {

// Format names in any case, as configs and override flags take enum names.
std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The one place where flags become ReadOptions.
bool IsArffName(const std::string& p) {
  const auto ends = [&p](const std::string& s) { return p.size() >= s.size() && p.compare(p.size() - s.size(), s.size(), s) == 0; };
  return ends(".arff") || ends(".arff.gz");
}

StatusOr<ReadOptions> OptionsFromFlags(const std::string& path) {
  ReadOptions o;
  const std::string format = FLAGS_format.empty() && IsArffName(path) ? "arff" : Lower(FLAGS_format);
  if (format == "xmc") {
    o.format = DataFormat::kXmc;
  } else if (format == "libsvm") {
    o.format = DataFormat::kLibsvm;
  } else if (format == "arff") {
    o.format = DataFormat::kArff;
    if (FLAGS_index_base != -1 && FLAGS_index_base != 0)
      return Status::InvalidArgument("--index_base must be 0 or unset for ARFF (its indices are 0-based), got " +
                                     std::to_string(FLAGS_index_base));
    o.label_xml = FLAGS_label_xml;
  } else {
    return Status::InvalidArgument(FLAGS_format.empty()
                                       ? "--format is required (xmc, libsvm or arff) for " + path
                                       : "--format must be xmc, libsvm or arff, got '" + FLAGS_format + "'");
  }
  if (!FLAGS_label_xml.empty() && o.format != DataFormat::kArff)
    return Status::InvalidArgument("--label_xml applies to ARFF input only");
  if (o.format == DataFormat::kArff) {
    o.index_base = -1;
  } else if (FLAGS_index_base != 0 && FLAGS_index_base != 1) {
    return Status::InvalidArgument("--index_base must be 0 or 1, got " +
                                   std::to_string(FLAGS_index_base) +
                                   (FLAGS_index_base == -1 ? " (unset; it is required)" : ""));
  }
  if (o.format != DataFormat::kArff) o.index_base = FLAGS_index_base;
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
  if (FLAGS_hashed_features && o.format == DataFormat::kArff)
    return Status::InvalidArgument("--hashed_features applies to XMC and LIBSVM input only (ARFF names its features)");
  if (FLAGS_hashed_features && FLAGS_num_features != 0)
    return Status::InvalidArgument("--num_features must be 0 with --hashed_features (feature ids are any 64-bit "
                                   "integer), got " + std::to_string(FLAGS_num_features));
  o.hashed_features = FLAGS_hashed_features;
  o.skip_unlabeled = FLAGS_skip_unlabeled;
  return o;
}

// Reads `path` with the flags' options (and --split); prints the error and
// returns false on failure.
bool Load(const std::string& path, Dataset* ds, double* ms) {
  StatusOr<ReadOptions> opts = OptionsFromFlags(path);
  if (!opts.ok()) {
    std::fprintf(stderr, "tether-data: %s\n", opts.status().message().c_str());
    return false;
  }
  LOG(INFO) << "tether-data: file=" << path << " format=" << FLAGS_format
            << " index_base=" << FLAGS_index_base << " num_features=" << FLAGS_num_features
            << " num_labels=" << FLAGS_num_labels << " split='" << FLAGS_split
            << "' partition=" << FLAGS_partition << "/" << FLAGS_num_partitions
            << " duplicates=" << FLAGS_duplicates << " non_finite=" << FLAGS_non_finite
            << " header_mismatch_is_error=" << FLAGS_header_mismatch_is_error
            << " skip_unlabeled=" << FLAGS_skip_unlabeled << " hashed_features=" << FLAGS_hashed_features
            << " label_xml='" << FLAGS_label_xml << "'";
  std::vector<int64_t> subset, subset_lines;
  if (!FLAGS_split.empty()) {
    StatusOr<std::vector<int64_t>> rows = ReadSplitFile(FLAGS_split, &subset_lines);
    if (!rows.ok()) {
      std::fprintf(stderr, "tether-data: %s\n", rows.status().message().c_str());
      return false;
    }
    subset = std::move(rows).value();
    opts->row_subset = &subset;
    opts->row_subset_file = FLAGS_split;
    opts->row_subset_lines = &subset_lines;
  }
  const auto t0 = std::chrono::steady_clock::now();
  StatusOr<Dataset> read = ReadDataset(path, *opts);
  *ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!read.ok()) {
    std::fprintf(stderr, "tether-data: %s\n", read.status().message().c_str());
    return false;
  }
  *ds = std::move(read).value();
  return true;
}

std::string FormatName(const std::string& path) {
  return FLAGS_format.empty() && IsArffName(path) ? "arff" : Lower(FLAGS_format);
}

int Check(const std::string& path) {
  Dataset d;
  double ms = 0;
  if (!Load(path, &d, &ms)) return 1;
  const Dataset* ds = &d;
  std::printf("file: %s\n", path.c_str());
  std::printf("format: %s\n", FormatName(path).c_str());
  if (FormatName(path) != "arff") std::printf("index_base: %d\n", FLAGS_index_base);
  if (!FLAGS_split.empty()) std::printf("split: %s\n", FLAGS_split.c_str());
  if (FLAGS_num_partitions > 1) {
    std::printf("partition: %d/%d\n", FLAGS_partition, FLAGS_num_partitions);
  }
  std::printf("rows: %lld\n", static_cast<long long>(ds->features.rows));
  std::printf("features: %lld%s\n", static_cast<long long>(ds->features.cols),
              ds->features.col_keys ? " (distinct hashed ids)" : "");
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

int Stats(const std::string& path) {
  Dataset ds;
  double ms = 0;
  if (!Load(path, &ds, &ms)) return 1;
  const DatasetStats st = ComputeStats(ds);
  std::printf("file: %s\nformat: %s\n", path.c_str(), FormatName(path).c_str());
  std::printf("rows: %lld\nfeatures: %lld\nlabels: %lld\n", static_cast<long long>(st.rows),
              static_cast<long long>(st.features), static_cast<long long>(st.labels));
  std::printf("nnz: %lld\n", static_cast<long long>(st.nnz));
  std::printf("nnz_per_row: min %lld mean %.4f max %lld\n", static_cast<long long>(st.nnz_min), st.nnz_mean,
              static_cast<long long>(st.nnz_max));
  std::printf("unused_features: %lld\n", static_cast<long long>(st.unused_features));
  if (!ds.targets.empty()) {
    std::printf("targets: %zu (single-label)\n", ds.targets.size());
  } else {
    std::printf("label_nnz: %lld\n", static_cast<long long>(st.label_nnz));
    std::printf("labels_per_row: min %lld mean %.4f max %lld\n", static_cast<long long>(st.labels_min),
                st.labels_mean, static_cast<long long>(st.labels_max));
    std::printf("unused_labels: %lld\n", static_cast<long long>(st.unused_labels));
    std::printf("label_frequency (rows per label, nearest-rank quantiles):");
    for (size_t i = 0; i < st.quantiles.size(); ++i)
      std::printf(" q%g %lld", st.quantiles[i], static_cast<long long>(st.label_freq_at[i]));
    std::printf("\n");
  }
  std::printf("load_ms: %.1f\n", ms);
  return 0;
}

// --to=arff: where the label XML goes (--out_xml, or --out with .arff[.gz]
// replaced by .xml).
std::string ArffXmlPath() {
  if (!FLAGS_out_xml.empty()) return FLAGS_out_xml;
  std::string stem = FLAGS_out;
  for (const char* ext : {".gz", ".arff"})
    if (stem.size() > std::strlen(ext) && stem.compare(stem.size() - std::strlen(ext), std::string::npos, ext) == 0)
      stem.resize(stem.size() - std::strlen(ext));
  return stem + ".xml";
}

// convert's outputs, none of which may be a file it reads (a link to --in
// included) or another output (core/job_inputs.h CheckOutputs).
Status CheckConvertOutputs() {
  std::vector<NamedInput> outputs = {{"flag --out", FLAGS_out}};
  if (FLAGS_to == "arff")
    outputs.push_back({FLAGS_out_xml.empty() ? "the label XML" : "flag --out_xml", ArffXmlPath()});
  return CheckOutputs(outputs,
                      {{"flag --in", FLAGS_in}, {"flag --split", FLAGS_split}, {"flag --label_xml", FLAGS_label_xml}});
}

int Convert() {
  const auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "tether-data: %s\n", msg.c_str());
    return 1;
  };
  if (FLAGS_in.empty()) return fail("convert: --in is required");
  if (FLAGS_out.empty()) return fail("convert: --out is required");
  FLAGS_to = Lower(FLAGS_to);
  if (FLAGS_to != "xmc" && FLAGS_to != "libsvm" && FLAGS_to != "arff")
    return fail("convert: --to must be xmc, libsvm or arff, got '" + FLAGS_to + "'");
  if (FLAGS_out_index_base != -1 && FLAGS_out_index_base != 0 && FLAGS_out_index_base != 1)
    return fail("convert: --out_index_base must be 0 or 1, got " + std::to_string(FLAGS_out_index_base));
  if (FLAGS_to == "arff" && FLAGS_out_index_base > 0)
    return fail("convert: --out_index_base does not apply to ARFF (its indices are 0-based)");
  if (const Status outputs = CheckConvertOutputs(); !outputs.ok()) {
    std::fprintf(stderr, "tether-data: convert: %s\n", outputs.message().c_str());
    return 2;
  }
  Dataset ds;
  double ms = 0;
  if (!Load(FLAGS_in, &ds, &ms)) return 1;
  Status st;
  std::string also;
  if (FLAGS_to == "xmc") {
    st = WriteXmc(ds, FLAGS_out, FLAGS_out_index_base == -1 ? 0 : FLAGS_out_index_base);
  } else if (FLAGS_to == "libsvm") {
    st = WriteLibsvm(ds, FLAGS_out, FLAGS_out_index_base == -1 ? 1 : FLAGS_out_index_base);
  } else {
    const std::string xml = ArffXmlPath();
    std::string relation = FLAGS_relation;
    if (relation.empty() && FormatName(FLAGS_in) == "arff") {
      ReadOptions o;
      o.format = DataFormat::kArff;
      o.label_xml = FLAGS_label_xml;
      o.num_labels = FLAGS_num_labels;
      if (StatusOr<ArffHeader> h = ReadArffHeader(FLAGS_in, o); h.ok()) relation = h->relation;
    }
    st = WriteArff(ds, FLAGS_out, xml, relation);
    also = " and " + xml;
  }
  if (!st.ok()) return fail(st.message());
  std::printf("wrote %s%s: %lld rows, %lld features, %lld labels, nnz %lld\n", FLAGS_out.c_str(), also.c_str(),
              static_cast<long long>(ds.features.rows), static_cast<long long>(ds.features.cols),
              static_cast<long long>(ds.targets.empty() ? ds.labels.cols : 0),
              static_cast<long long>(ds.features.nnz()));
  return 0;
}

}  // namespace
}  // namespace tether

int main(int argc, char** argv) {
  const std::string usage =
      "tether-data check|stats [--format=xmc|libsvm|arff] [--index_base=0|1] [--label_xml=X] FILE\n"
      "       tether-data convert --in=F --out=G --to=xmc|libsvm|arff [--format=...] [--index_base=...]\n"
      "check: read a data file exactly as training does; stats: its shape and label frequencies;\n"
      "convert: write it in another format (never half-written).";
  // convert takes its files as flags, check and stats one FILE argument.
  const bool convert = argc > 1 && std::string(argv[1]) == "convert";
  const tether::CommandLine command_line{usage, convert ? std::vector<std::string>{"COMMAND"}
                                                        : std::vector<std::string>{"COMMAND", "FILE"}};
  tether::ParseFlagsOrDie(&argc, &argv, command_line);
  const std::string command = argv[1];
  if (command == "convert") return tether::Convert();
  if (command == "check") return tether::Check(argv[2]);
  if (command == "stats") return tether::Stats(argv[2]);
  std::fprintf(stderr, "error: unknown command '%s' (commands: check, stats, convert; usage: %s)\n", argv[1],
               usage.c_str());
  return 1;
}
