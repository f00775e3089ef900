#include "serving/export_data_check.h"

#include <utility>

#include "worker/models/model_registry.h"
#include "worker/train/data_watch.h"

namespace tether {
namespace {

bool IsTrainingDataField(const std::string& field) {
  return field == "data.train_file" || field == "data.train_label_file" || field == "data.train_split" ||
         field == "data.validation_split" || field == "data.label_xml";
}

// Why the export reads the training files, and what a user may do when
// they are gone or changed.
std::string Remedy(const JobConfig& config) {
  return std::string("the ") +
         (config.data().tf_idf() ? "TF-IDF weights an export writes are" : "label counts an export writes for PSP@k are") +
         " counted from the rows the job trained on; restore the training files" +
         (config.data().tf_idf() ? "" : ", or export with --label_counts=false (no label counts)");
}

// A training file that is gone (NotFound) gets the remedy a changed one does.
Status WithRemedy(const Status& st, const JobConfig& config, const std::string& ckpt_dir) {
  if (st.code() != Status::Code::kNotFound) return st;
  return Status::NotFound("cannot export from " + ckpt_dir + ": " + st.message() + "; " + Remedy(config));
}

}  // namespace

bool ExportReadsTrainingData(const JobConfig& config, bool with_label_counts) {
  return config.data().tf_idf() || (with_label_counts && LabelKindOf(config) == LabelKind::kMultiLabel);
}

Status CheckExportData(const JobConfig& config, const CheckpointManifest& manifest, const std::string& ckpt_dir,
                       std::vector<std::string>* notes) {
  StatusOr<std::vector<WatchedFile>> all = JobDataFiles(config);
  if (!all.ok()) return WithRemedy(all.status(), config, ckpt_dir);
  std::vector<WatchedFile> training;
  for (WatchedFile& f : *all)
    if (IsTrainingDataField(f.field)) training.push_back(std::move(f));
  StatusOr<DataWatch> watch = DataWatch::Start(std::move(training));
  if (!watch.ok()) return WithRemedy(watch.status(), config, ckpt_dir);
  CheckpointManifest recorded = manifest;
  recorded.clear_data_files();
  for (const DataFileRecord& r : manifest.data_files())
    if (IsTrainingDataField(r.field())) *recorded.add_data_files() = r;
  const std::vector<std::string> changes = watch->ChangesSince(recorded, ckpt_dir, notes);
  if (changes.empty()) return Status::OK();
  std::string text;
  for (const std::string& c : changes) text += (text.empty() ? "" : "; ") + c;
  return Status::FailedPrecondition("cannot export from " + ckpt_dir + ": " + text + " (since the checkpoint): " +
                                    Remedy(config));
}

}  // namespace tether
