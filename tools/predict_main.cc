// tether-predict: scores new rows with a model file, safetensors or npz
// (tether-export, or tether-worker --in_process --model_out) and writes each row's top-K labels
// with their scores; when the input carries labels it also prints P@k,
// nDCG@k and the propensity-scored PSP@k / PSnDCG@k (Jain, Prabhu & Varma,
// KDD 2016, as pyxclib computes them), like training's log.
//
// With several models (--model=a.safetensors,b.safetensors: different
// seeds of one job), the rows are scored by their ensemble (the mean of the
// models' probabilities, serving/scorer.h), and each model's own metrics
// are printed first ("model N FILE: NAME VALUE"), then the ensemble's.
//
//   tether-predict --model=model.safetensors --input=FILE [--format=xmc|libsvm] [--index_base=0|1]
//                  [--split=ROWS_FILE] --top_k=K --output=preds.tsv [--threads=N] [--device=cpu|cuda]
//                  [--psp_a=0.55 --psp_b=1.5] [--metrics_out=FILE.json]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/data_files.h"
#include "core/file_util.h"
#include "core/job_inputs.h"
#include "core/output_path.h"
#include "checkpoint/model_file.h"
#include "cli/flag_parser.h"
#include "serving/input_reading.h"
#include "serving/predictor.h"
#include "serving/scorer.h"
#include "worker/models/model_registry.h"
#include "worker/trainer.h"

DEFINE_string(model, "",
              "Required: the model file (safetensors or npz, as tether-export writes them; read by content); "
              "several, comma-separated, "
              "score as an ensemble (the mean of their probabilities), each model's metrics printed beside");
DEFINE_string(input, "", "Required: the rows to score (text or gzip)");
DEFINE_string(format, "", "The input's format, xmc or libsvm; default: the model's (data.format of the data it "
                          "was trained on, recorded in the model file); another is taken with a warning");
DEFINE_int32(index_base, -1, "The input's index base, 0 or 1 (feature indices and XMC label ids; output label ids "
                             "use it too); default: the model's (data.index_base of the data it was trained on); "
                             "another is taken with a warning");
DEFINE_string(split, "", "Optional split file (1-based row indices, one per line): score only those rows");
DEFINE_int32(top_k, 5, "Labels written per row, best first (multi-label and multiclass models)");
DEFINE_string(output, "", "Required: predictions, one line per input row: LABEL:SCORE entries separated by tabs "
                          "(written atomically)");
DEFINE_int32(threads, 1, "Compute threads, each scoring its own blocks of rows");
DEFINE_string(device, "cpu", "Compute backend: cpu, cuda or auto");
DEFINE_double(psp_a, 0.55, "Propensity constant A of PSP@k (0.6 for Amazon-670K, 0.5 for Wikipedia-500K)");
DEFINE_double(psp_b, 1.5, "Propensity constant B of PSP@k (2.6 for Amazon-670K, 0.4 for Wikipedia-500K)");
DEFINE_string(metrics_out, "", "Optional: the metrics, rows and rows/s as JSON (full precision), written atomically");

namespace tether {
namespace {

std::string Number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

constexpr const char* kWho = "[predict] ";

// The flags' checks (exit 2 on a bad one), then the values in force.
bool FlagsValid() {
  const char* who = kWho;
  if (FLAGS_model.empty() || FLAGS_input.empty() || FLAGS_output.empty()) {
    LOG(ERROR) << who << "--model, --input and --output are required";
    return false;
  }
  // Unset, both come from the model (ResolveInputReading).
  if (!FLAGS_format.empty() && FLAGS_format != "xmc" && FLAGS_format != "libsvm") {
    LOG(ERROR) << who << "--format must be xmc or libsvm, got '" << FLAGS_format << "'";
    return false;
  }
  if (!google::GetCommandLineFlagInfoOrDie("index_base").is_default && FLAGS_index_base != 0 &&
      FLAGS_index_base != 1) {
    LOG(ERROR) << who << "--index_base must be 0 or 1, got " << FLAGS_index_base;
    return false;
  }
  if (FLAGS_top_k < 1 || FLAGS_threads < 1) {
    LOG(ERROR) << who << "--top_k and --threads must be >= 1";
    return false;
  }
  if (FLAGS_device != "auto" && FLAGS_device != "cpu" && FLAGS_device != "cuda") {
    LOG(ERROR) << who << "--device must be auto, cpu or cuda, got '" << FLAGS_device << "'";
    return false;
  }
  // The trainer's rule for train.psp_a and train.psp_b.
  for (const auto& [flag, value] : {std::pair<const char*, double>{"flag --psp_a", FLAGS_psp_a},
                                    {"flag --psp_b", FLAGS_psp_b}})
    if (const tether::Status st = tether::CheckPspConstant(value, flag); !st.ok()) {
      LOG(ERROR) << who << st.message();
      return false;
    }
  // Found before the model is read and the rows scored, naming the flag.
  // Both may be a character device or FIFO, written through: --output=/dev/stdout
  // prints the predictions (core/output_target.h).
  const std::vector<tether::NamedInput> inputs = {
      {"flag --model", FLAGS_model}, {"flag --input", FLAGS_input}, {"flag --split", FLAGS_split}};
  const std::vector<tether::NamedInput> outputs = {{"flag --output", FLAGS_output},
                                                    {"flag --metrics_out", FLAGS_metrics_out}};
  tether::Status st;
  for (const tether::NamedInput& out : outputs)
    if (st.ok() && !out.path.empty())
      st = tether::CheckWritableFile(out.path, out.source, false, tether::StreamOutput::kWriteThrough);
  if (st.ok()) st = tether::CheckOutputs(outputs, inputs);
  if (!st.ok()) {
    LOG(ERROR) << who << st.message();
    return false;
  }
  LOG(INFO) << who << "model=" << FLAGS_model << " input=" << FLAGS_input << " format='" << FLAGS_format
            << "' index_base=" << FLAGS_index_base << " split='" << FLAGS_split << "' top_k=" << FLAGS_top_k
            << " output=" << FLAGS_output << " threads=" << FLAGS_threads << " device=" << FLAGS_device
            << " psp_a=" << FLAGS_psp_a << " psp_b=" << FLAGS_psp_b;
  return true;
}

// --model's comma-separated paths, as data.train_file's are split (each
// trimmed); an empty entry is refused, naming it.
tether::StatusOr<std::vector<std::string>> SplitModelList(const std::string& list) {
  std::vector<std::string> out = tether::SplitFileList(list);
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].empty())
      return tether::Status::InvalidArgument("flag --model: entry " + std::to_string(i + 1) + " of '" + list +
                                             "' is empty");
  return out;
}

// A reader's error about the config's widths: they come from the model file
// here, not from a config the user wrote, so the message says so.
std::string WidthsFromModel(std::string msg) {
  for (const char* field : {"data.num_features", "data.num_labels"}) {
    const std::string named = std::string("config field ") + field;
    const size_t at = msg.find(named);
    if (at != std::string::npos) msg.replace(at, named.size(), "the model " + FLAGS_model + "'s " + (field + 5));
  }
  return msg;
}

// The input as training read its data (LoadSplit: the model's feature
// scale; with data.tf_idf the model file's feature weights, then the row
// normalisation), in the input's own format and base (set in `config`).
// An ensemble's members must weigh the input alike. Errors: named for the
// user (the model file set the widths and weights).
StatusOr<Dataset> ReadInput(const JobConfig& config, const std::vector<std::string>& paths,
                            const std::vector<ModelFileContents>& files) {
  for (size_t i = 1; i < files.size(); ++i) {
    // Before any input is read or scored: members that read it differently
    // (data.tf_idf, normalize_rows, widths, ...) are named by field.
    if (const std::string d = EnsembleMismatch(files[0].model.config, files[i].model.config); !d.empty())
      return Status::InvalidArgument(paths[i] + " (model " + std::to_string(i + 1) + " of the ensemble) differs from " +
                                     paths[0] + " in " + d + ": an ensemble averages models that score the same "
                                     "outputs from the same input");
    if (files[i].feature_idf != files[0].feature_idf)
      return Status::InvalidArgument(paths[i] + ": its TF-IDF weights (tensor 'feature_idf') differ from those of " +
                                     paths[0] + ": an ensemble's models must weigh the input alike");
  }
  const auto load_start = std::chrono::steady_clock::now();
  StatusOr<Dataset> data = LoadSplit(config, FLAGS_input, "", FLAGS_split, 0, 1);
  if (!data.ok()) return Status::InvalidArgument(WidthsFromModel(data.status().message()));
  if (Status st = FinishFeatures(config, files[0].feature_idf, &data->features); !st.ok())
    return Status::InvalidArgument(paths[0] + ": " + st.message());
  LOG(INFO) << kWho << "read " << data->features.rows << " rows in "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count() << " s"
            << (config.data().tf_idf() ? ", weighted by the model's TF-IDF weights" : "");
  return data;
}

// --output: one line per row, LABEL:SCORE entries separated by tabs. The
// model's config knows the label numbering; the input's base wins.
Status WritePredictions(const JobConfig& config, const Predictions& p) {
  std::string out;
  char buf[64];
  for (int64_t r = 0; r < p.rows; ++r) {
    for (int j = 0; j < p.k; ++j) {
      const int64_t id = OutputLabelId(config, p.labels[r * p.k + j]);
      std::snprintf(buf, sizeof(buf), "%s%lld:%.7g", j == 0 ? "" : "\t", static_cast<long long>(id),
                    static_cast<double>(p.scores[r * p.k + j]));
      out += buf;
    }
    out += '\n';
  }
  return WriteFileAtomically(FLAGS_output, out, StreamOutput::kWriteThrough);
}

// The metrics on stdout ("NAME VALUE" lines), with warnings about what they
// lack; then --metrics_out.
// Each model's metrics alone (an ensemble's members), printed as "model N
// FILE: NAME VALUE" lines and kept for --metrics_out.
struct MemberMetrics {
  std::string path;
  std::vector<std::pair<std::string, double>> metrics;
};

Status ReportMetrics(const JobConfig& config, const ModelFileContents& file, const Predictions& p, double seconds,
                     const std::vector<MemberMetrics>& members) {
  if (p.metrics.empty()) {
    LOG(INFO) << kWho << "the input carries no labels: no metrics";
  } else {
    if (p.tied_rows > 0)
      LOG(WARNING) << kWho << p.tied_rows << " of " << p.rows
                   << " rows have tied scores at the top of their ranking; ties are scored by their expected value";
    if (file.label_counts.empty() && LabelKindOf(config) == LabelKind::kMultiLabel)
      LOG(WARNING) << kWho << FLAGS_model << " holds no training label counts: no PSP@k (export with --label_counts)";
    for (const auto& [name, value] : p.metrics) std::printf("%s %s\n", name.c_str(), Number(value).c_str());
    std::fflush(stdout);
  }
  if (FLAGS_metrics_out.empty()) return Status::OK();
  nlohmann::json j{{"rows", p.rows}, {"seconds", seconds}, {"rows_per_second", p.rows / std::max(1e-9, seconds)},
                   {"threads", FLAGS_threads}};
  for (const auto& [name, value] : p.metrics) j[name] = std::isfinite(value) ? nlohmann::json(value) : nullptr;
  if (!members.empty()) {
    j["ensemble_size"] = members.size();
    nlohmann::json list = nlohmann::json::array();
    for (const MemberMetrics& m : members) {
      nlohmann::json one{{"model", m.path}};
      for (const auto& [name, value] : m.metrics) one[name] = std::isfinite(value) ? nlohmann::json(value) : nullptr;
      list.push_back(one);
    }
    j["models"] = list;
  }
  return WriteFileAtomically(FLAGS_metrics_out, j.dump(2) + "\n", StreamOutput::kWriteThrough);
}

int Run() {
  const char* who = kWho;
  if (!FlagsValid()) return 2;
  // A path that cannot be a model file (missing, a directory, a file of a
  // checkpoint) is a bad flag: exit 2, naming what to run instead.
  const StatusOr<std::vector<std::string>> split = SplitModelList(FLAGS_model);
  if (!split.ok()) {
    LOG(ERROR) << who << split.status().message();
    return 2;
  }
  const std::vector<std::string>& paths = *split;
  for (const std::string& path : paths) {
    if (const Status path_ok = CheckModelFilePath(path); !path_ok.ok()) {
      // The message starts with the path, which names the model at fault.
      LOG(ERROR) << who << "--model=" << FLAGS_model << ": " << path_ok.message();
      return 2;
    }
  }
  std::vector<ModelFileContents> files;
  for (const std::string& path : paths) {
    StatusOr<ModelFileContents> one = ReadModelFile(path);
    if (!one.ok()) {
      LOG(ERROR) << who << one.status().message();
      return 1;
    }
    // Before the input is read: what the model claims must hold (its file
    // is untrusted input too).
    if (const Status shape = CheckModelShape(one->model); !shape.ok()) {
      LOG(ERROR) << who << path << ": " << shape.message();
      return 1;
    }
    files.push_back(std::move(one).value());
  }
  const ModelFileContents* file = &files[0];
  JobConfig config = file->model.config;
  // An ensemble's members read the input alike (ReadInput checks them).
  const int index_base_flag =
      google::GetCommandLineFlagInfoOrDie("index_base").is_default ? -1 : FLAGS_index_base;
  StatusOr<InputReading> reading = ResolveInputReading(config, paths[0], FLAGS_format, index_base_flag);
  if (!reading.ok()) {
    LOG(ERROR) << who << reading.status().message();
    return 2;
  }
  for (const std::string& warning : reading->warnings) LOG(WARNING) << who << warning;
  LOG(INFO) << who << "reading " << FLAGS_input << ": " << reading->source;
  config.mutable_data()->set_format(reading->format);
  config.mutable_data()->set_index_base(reading->index_base);
  StatusOr<Dataset> data = ReadInput(config, paths, files);
  if (!data.ok()) {
    LOG(ERROR) << who << data.status().message();
    return 1;
  }
  PredictOptions options;
  options.threads = FLAGS_threads;
  options.device = FLAGS_device;
  options.top_k = FLAGS_top_k;
  options.psp_a = FLAGS_psp_a;
  options.psp_b = FLAGS_psp_b;
  // An ensemble: each model alone first, for its metrics beside the
  // ensemble's (and to name a model that fails).
  std::vector<MemberMetrics> members;
  std::vector<const TrainedModel*> models;
  for (size_t i = 0; paths.size() > 1 && i < files.size(); ++i) {
    StatusOr<Predictions> one = PredictRows(files[i].model, file->label_counts, *data, options);
    if (!one.ok()) {
      LOG(ERROR) << who << paths[i] << ": " << one.status().message();
      return 1;
    }
    for (const auto& [name, value] : one->metrics)
      std::printf("model %zu %s: %s %s\n", i + 1, paths[i].c_str(), name.c_str(), Number(value).c_str());
    members.push_back({paths[i], one->metrics});
    models.push_back(&files[i].model);
  }
  const auto start = std::chrono::steady_clock::now();
  StatusOr<Predictions> p = paths.size() > 1 ? PredictEnsemble(models, file->label_counts, *data, options)
                                             : PredictRows(file->model, file->label_counts, *data, options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!p.ok()) {
    LOG(ERROR) << who << p.status().message();
    return 1;
  }
  if (paths.size() > 1) LOG(INFO) << who << "an ensemble of " << paths.size() << " models: its metrics follow";
  LOG(INFO) << who << "scored " << p->rows << " rows in " << seconds << " s ("
            << static_cast<int64_t>(p->rows / std::max(1e-9, seconds)) << " rows/s, " << FLAGS_threads
            << " thread(s), " << FLAGS_device << ")";
  Status st = WritePredictions(config, *p);
  if (st.ok()) st = ReportMetrics(config, *file, *p, seconds, members);
  if (!st.ok()) {
    LOG(ERROR) << who << st.message();
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace tether

int main(int argc, char** argv) {
  tether::ParseFlagsOrDie(&argc, &argv,
                          {"tether-predict --model=model.safetensors|model.npz[,more.safetensors] --input=FILE "
                           "[--format=xmc|libsvm] [--index_base=0|1] [--split=ROWS] --top_k=K --output=preds.tsv [--threads=N] "
                           "[--device=cpu|cuda] [--psp_a=0.55 --psp_b=1.5] [--metrics_out=FILE]\n"
                           "Scores rows with a trained model; prints P@k, nDCG@k, PSP@k when the rows carry labels."});
  return tether::Run();
}
