#include "worker/train/data_watch.h"

#include <xxhash.h>

#include <filesystem>
#include <set>
#include <tuple>
#include <utility>

#include "core/data_files.h"

namespace tether {
namespace {

std::string Absolute(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

Status AddField(const std::string& field, const std::string& spec, bool is_list, std::vector<WatchedFile>* out) {
  if (spec.empty()) return Status::OK();
  std::vector<std::string> paths{spec};
  if (is_list) {
    TETHER_ASSIGN_OR_RETURN(paths, ExpandFileList(spec, field));
  }
  for (const std::string& p : paths) out->push_back({field, Absolute(p)});
  return Status::OK();
}

DataFileStamp FromRecord(const DataFileRecord& r) {
  DataFileStamp s;
  s.path = r.path();
  s.bytes = r.bytes();
  s.mtime_ns = r.mtime_ns();
  s.digest = r.digest();
  return s;
}

// The stamps of each field, fields in first-seen order.
using ByField = std::vector<std::pair<std::string, std::vector<DataFileStamp>>>;

void Add(ByField* by, const std::string& field, DataFileStamp s) {
  for (auto& [f, list] : *by)
    if (f == field) {
      list.push_back(std::move(s));
      return;
    }
  by->push_back({field, {std::move(s)}});
}

const std::vector<DataFileStamp>* Find(const ByField& by, const std::string& field) {
  for (const auto& [f, list] : by)
    if (f == field) return &list;
  return nullptr;
}

std::string Paths(const std::vector<DataFileStamp>& stamps) {
  std::string out;
  for (const DataFileStamp& s : stamps) out += (out.empty() ? "" : ", ") + s.path;
  return out;
}

// "" when `now` is the file `was` records; else what changed. A file at
// another path is a copy or a move: its time is the copy's, so its size
// and digest alone tell.
std::string ResumeChange(const std::string& field, DataFileStamp was, const DataFileStamp& now,
                         std::vector<std::string>* notes) {
  if (was.path == now.path) return DataFileChange(was, now);
  const std::string recorded = was.path;
  was.path = now.path + " (" + field + "; the checkpoint's job read " + recorded + ")";
  was.mtime_ns = now.mtime_ns;
  std::string change = DataFileChange(was, now);
  if (change.empty())
    notes->push_back(field + ": " + now.path + " has the size and content digest of " + recorded +
                     ", which the checkpoint's job read: accepted as the same file");
  return change;
}

// The changes of one field's files, appended to *changes; a pair of files
// already compared under another field (train_file and test_file the same
// file) is not compared, nor named, again.
void CompareField(const std::string& field, const std::vector<DataFileStamp>& was,
                  const std::vector<DataFileStamp>& now, std::set<std::pair<std::string, std::string>>* compared,
                  std::vector<std::string>* changes, std::vector<std::string>* notes) {
  if (was.size() != now.size()) {
    changes->push_back("config field " + field + " names " + std::to_string(now.size()) + " file(s) (" + Paths(now) +
                       "), the checkpoint's job read " + std::to_string(was.size()) + " (" + Paths(was) + ")");
    return;
  }
  for (size_t i = 0; i < was.size(); ++i) {
    if (!compared->insert({was[i].path, now[i].path}).second) continue;
    std::string change = ResumeChange(field, was[i], now[i], notes);
    if (!change.empty()) changes->push_back(std::move(change));
  }
}

}  // namespace

StatusOr<std::vector<WatchedFile>> JobDataFiles(const JobConfig& config) {
  const DataConfig& d = config.data();
  std::vector<WatchedFile> files;
  const std::tuple<const char*, const std::string*, bool> fields[] = {
      {"data.train_file", &d.train_file(), true},          {"data.train_label_file", &d.train_label_file(), false},
      {"data.train_split", &d.train_split(), false},       {"data.validation_split", &d.validation_split(), false},
      {"data.label_xml", &d.label_xml(), false},           {"data.test_file", &d.test_file(), true},
      {"data.test_label_file", &d.test_label_file(), false}, {"data.test_split", &d.test_split(), false}};
  for (const auto& [field, spec, is_list] : fields)
    TETHER_RETURN_IF_ERROR(AddField(field, *spec, is_list && IsFileList(*spec), &files));
  return files;
}

StatusOr<DataWatch> DataWatch::Start(std::vector<WatchedFile> files) {
  DataWatch w;
  for (const WatchedFile& f : files) {
    TETHER_ASSIGN_OR_RETURN(DataFileStamp s, StampDataFile(f.path));
    w.stamps_.push_back(std::move(s));
  }
  w.files_ = std::move(files);
  return w;
}

Status DataWatch::Check(const std::string& when) const {
  // A file named by two fields (train_file and test_file) is read once.
  std::vector<DataFileStamp> unique;
  std::set<std::string> seen;
  for (const DataFileStamp& s : stamps_)
    if (seen.insert(s.path).second) unique.push_back(s);
  return CheckDataFilesUnchanged(unique, "while the job ran: checked " + when);
}

std::vector<std::pair<std::string, uint64_t>> DataWatch::FieldDigests() const {
  std::vector<std::pair<std::string, uint64_t>> out;
  std::vector<uint64_t> parts;  // each file of the field: its size and content digest, in order
  for (size_t i = 0; i < stamps_.size(); ++i) {
    parts.push_back(stamps_[i].bytes);
    parts.push_back(stamps_[i].digest);
    if (i + 1 == stamps_.size() || files_[i + 1].field != files_[i].field) {
      out.push_back({files_[i].field, XXH3_64bits(parts.data(), parts.size() * sizeof(uint64_t))});
      parts.clear();
    }
  }
  return out;
}

void DataWatch::Record(CheckpointManifest* manifest) const {
  manifest->clear_data_files();
  for (size_t i = 0; i < stamps_.size(); ++i) {
    DataFileRecord* r = manifest->add_data_files();
    r->set_field(files_[i].field);
    r->set_path(stamps_[i].path);
    r->set_bytes(stamps_[i].bytes);
    r->set_mtime_ns(stamps_[i].mtime_ns);
    r->set_digest(stamps_[i].digest);
  }
  manifest->set_data_files_recorded(true);
}

std::vector<std::string> DataWatch::ChangesSince(const CheckpointManifest& manifest, const std::string& ckpt_dir,
                                                std::vector<std::string>* notes) const {
  if (!manifest.data_files_recorded()) {
    notes->push_back("the checkpoint " + ckpt_dir +
                     " records no data-file stamps (written before they were recorded): the data files could not "
                     "be checked against it");
    return {};
  }
  ByField was, now;
  for (const DataFileRecord& r : manifest.data_files()) Add(&was, r.field(), FromRecord(r));
  for (size_t i = 0; i < stamps_.size(); ++i) Add(&now, files_[i].field, stamps_[i]);
  std::vector<std::string> changes;
  std::set<std::pair<std::string, std::string>> compared;
  for (const auto& [field, recorded] : was) {
    const std::vector<DataFileStamp>* mine = Find(now, field);
    if (mine == nullptr) {
      notes->push_back(field + " is not set in this job (the checkpoint's job read " + Paths(recorded) +
                       "): not compared");
      continue;
    }
    CompareField(field, recorded, *mine, &compared, &changes, notes);
  }
  for (const auto& [field, mine] : now)
    if (Find(was, field) == nullptr)
      notes->push_back(field + " (" + Paths(mine) + ") was not set in the checkpoint's job: not compared");
  return changes;
}

Status DataWatch::CheckResume(const CheckpointManifest& manifest, const std::string& ckpt_dir,
                              std::vector<std::string>* notes) const {
  const std::vector<std::string> changes = ChangesSince(manifest, ckpt_dir, notes);
  if (changes.empty()) return Status::OK();
  std::string text;
  for (const std::string& c : changes) text += (text.empty() ? "" : "; ") + c;
  return Status::FailedPrecondition("cannot resume from " + ckpt_dir + ": " + text +
                                    " (since the checkpoint): its places in the data are rows of the files it "
                                    "recorded; restore the file, or start a new job from it");
}

}  // namespace tether
