// tether-export: a checkpoint's trained tables as a model file users load
// elsewhere (safetensors for PyTorch / Hugging Face, or a NumPy .npz), with
// everything needed to score new data in its metadata (checkpoint/model_file.h).
//
//   tether-export --checkpoint=DIR --out=model.safetensors [--format=safetensors|npz]
//                 [--label_counts=true]
//   tether-export --model=model.safetensors --out=model.npz   (convert a model file, either way)
//   tether-export --model=model.npz --out=model.safetensors
#include <cstdio>
#include <string>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include "checkpoint/checkpoint.h"
#include "checkpoint/latest_checkpoint.h"
#include "checkpoint/model_file.h"
#include "checkpoint/trained_model.h"
#include "cli/flag_parser.h"
#include "core/job_inputs.h"
#include "core/output_path.h"
#include "serving/export_data_check.h"
#include "serving/model_export.h"
#include "serving/scorer.h"

DEFINE_string(checkpoint, "", "A checkpoint, or a directory of checkpoints (the latest complete one)");
DEFINE_string(model, "", "Instead of --checkpoint: a model file (safetensors or npz, read by content) to write "
                         "again in --format (its label counts and TF-IDF weights are kept)");
DEFINE_string(out, "", "Required: the model file to write (atomically: temporary file, fsync, rename)");
DEFINE_string(format, "",
              "safetensors or npz (a NumPy .npz archive of .npy files); default: from --out's name (FILE.npz: "
              "npz, else safetensors); one that contradicts the name is refused");
DEFINE_bool(label_counts, true,
            "multi-label models: count the training labels of the rows the job trained on (data.train_file, "
            "data.train_split, without the validation rows) and store them for PSP@k; false: skip (no training "
            "data needed, unless the model weighs its input by data.tf_idf, whose weights are always counted from "
            "it)");

namespace {

// The training files against the stamps the checkpoint `ckpt` recorded
// (serving/export_data_check.h), before the export counts from them.
tether::Status CheckTrainingData(const tether::LoadedCheckpoint& ckpt, const char* who) {
  std::vector<std::string> notes;
  TETHER_RETURN_IF_ERROR(tether::CheckExportData(ckpt.model.config, ckpt.manifest, ckpt.dir, &notes));
  for (const std::string& note : notes) LOG(WARNING) << who << note;
  return tether::Status::OK();
}

// --out's format (from its name and --format), once --out is known to be
// writable: found before the model is read, naming the flag.
tether::StatusOr<tether::ModelFileFormat> OutputFormat() {
  TETHER_ASSIGN_OR_RETURN(const tether::ModelFileFormat format, tether::ModelFileFormatFor(FLAGS_out, FLAGS_format));
  TETHER_RETURN_IF_ERROR(tether::CheckWritableFile(FLAGS_out, "flag --out", false));
  // A checkpoint is a folder: none of its files may be --out.
  TETHER_RETURN_IF_ERROR(tether::CheckOutputs(
      {{"flag --out", FLAGS_out}}, {{"flag --model", FLAGS_model}, {"flag --checkpoint", FLAGS_checkpoint}}));
  return format;
}

}  // namespace

int main(int argc, char** argv) {
  tether::ParseFlagsOrDie(&argc, &argv,
                          {"tether-export --checkpoint=DIR --out=model.safetensors [--format=safetensors|npz] "
                           "[--label_counts=true|false]\n"
                           "   or: tether-export --model=model.safetensors|model.npz --out=model.npz|model.safetensors\n"
                           "Writes a checkpoint's trained model as safetensors or NumPy npz."});
  const char* who = "[export] ";
  if (FLAGS_checkpoint.empty() == FLAGS_model.empty() || FLAGS_out.empty()) {
    LOG(ERROR) << who << "--out and one of --checkpoint or --model are required";
    return 2;
  }
  const tether::StatusOr<tether::ModelFileFormat> format = OutputFormat();
  if (!format.ok()) {
    LOG(ERROR) << who << format.status().message();
    return 2;
  }
  LOG(INFO) << who << "checkpoint=" << FLAGS_checkpoint << " model=" << FLAGS_model << " out=" << FLAGS_out
            << " format=" << (*format == tether::ModelFileFormat::kNpz ? "npz" : "safetensors") << " label_counts=" << (FLAGS_label_counts ? "true" : "false");
  if (!FLAGS_model.empty()) {
    if (const tether::Status path_ok = tether::CheckModelFilePath(FLAGS_model); !path_ok.ok()) {
      LOG(ERROR) << who << "--model=" << FLAGS_model << ": " << path_ok.message();
      return 2;
    }
    tether::StatusOr<tether::ModelFileContents> file = tether::ReadModelFile(FLAGS_model);
    tether::Status st = file.status();
    // The file's tables must be the ones its job_config declares (their key
    // ranges included), as tether-predict requires: a file it would refuse
    // is not carried on.
    if (st.ok()) st = tether::CheckModelTables(file->model).WithPrefix(FLAGS_model);
    if (st.ok())
      st = tether::WriteModelFile(file->model, FLAGS_label_counts ? file->label_counts : tether::LabelCounts{},
                                  file->feature_idf, FLAGS_out, *format);
    if (!st.ok()) {
      LOG(ERROR) << who << st.message();
      return 1;
    }
    LOG(INFO) << who << "wrote " << FLAGS_out;
    return 0;
  }
  // A path that is no checkpoint (missing, a file such as a shard file or
  // the MANIFEST, a directory with none) is a bad flag: exit 2, naming the
  // directory to give instead where there is one.
  const tether::StatusOr<std::string> dir = tether::ResolveCheckpoint(FLAGS_checkpoint);
  if (!dir.ok()) {
    LOG(ERROR) << who << "--checkpoint=" << FLAGS_checkpoint << ": " << dir.status().message();
    return 2;
  }
  // A live job may prune the checkpoint chosen while it is read: the
  // then-latest one is chosen again (checkpoint/latest_checkpoint.h).
  const tether::StatusOr<tether::LoadedCheckpoint> ckpt = tether::LoadLatestCheckpoint(FLAGS_checkpoint);
  if (!ckpt.ok()) {
    LOG(ERROR) << who << ckpt.status().message();
    return 1;
  }
  const tether::TrainedModel* model = &ckpt->model;
  if (tether::ExportReadsTrainingData(model->config, FLAGS_label_counts)) {
    // The training data the labels are counted from is an input too, known
    // once the checkpoint's config is read; still before anything is written.
    const tether::Status out_ok =
        tether::CheckOutputs({{"flag --out", FLAGS_out}}, tether::JobInputs("", "", model->config, ""));
    if (!out_ok.ok()) {
      LOG(ERROR) << who << out_ok.message();
      return 2;
    }
    const tether::Status data_ok = CheckTrainingData(*ckpt, who);
    if (!data_ok.ok()) {
      LOG(ERROR) << who << data_ok.message();
      return 1;
    }
  }
  const tether::Status st = tether::ExportModel(*model, FLAGS_out, *format, FLAGS_label_counts);
  if (!st.ok()) {
    LOG(ERROR) << who << st.message();
    return 1;
  }
  return 0;
}
