// DataWatch: the data files one worker reads, stamped when it reads them
// (core/data_stamp.h: size, modification time, an XXH3-64 of the size and
// both 64 KiB ends), so that a file changed under the running job, or
// between a checkpoint and its resume, is named instead of trained on.
//
//   Start          stamps every data file of the job, before any is read
//   Check          stamps them again and compares (the end of each epoch,
//                  before each checkpoint): two 64 KiB reads per file
//   Record         writes the stamps into a checkpoint's manifest
//   CheckResume    compares a manifest's stamps with these (a resume)
//
// An edit in the middle of a large file that keeps its size and time is not
// seen: that is the price of not reading the files again.
//
// Ownership: holds copies of the paths and stamps. Thread-safety: const
// methods are thread-safe; Start builds a new watch.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/data_stamp.h"
#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "proto/config.pb.h"

namespace tether {

/// A data file of the job and the config field that names it.
struct WatchedFile {
  std::string field;  // "data.train_file"
  std::string path;   // absolute, lexically normal
};

/// The data files a worker of `config` reads, in config order: every file
/// of data.train_file (a list or pattern expanded), train_label_file,
/// train_split, validation_split, label_xml, then test_file's files,
/// test_label_file, test_split. Unset fields are left out; a file named by
/// two fields (train_file and test_file the same) appears under each.
/// Errors: ExpandFileList's (a pattern that matches nothing).
StatusOr<std::vector<WatchedFile>> JobDataFiles(const JobConfig& config);

class DataWatch {
 public:
  DataWatch() = default;  // watches nothing

  /// Stamps every file of `files`. Errors: StampDataFile's (NotFound,
  /// IOError naming the file).
  static StatusOr<DataWatch> Start(std::vector<WatchedFile> files);

  /// Every file stamped again and compared with its stamp from Start (each
  /// path once): OK, or FailedPrecondition naming each changed file and
  /// what changed (DataFileChange's text), with `when` ("at the end of
  /// epoch 3") in the message.
  Status Check(const std::string& when) const;

  /// Sets manifest->data_files (one per watched file) and
  /// data_files_recorded.
  void Record(CheckpointManifest* manifest) const;

  /// What changed since `manifest` (the checkpoint in `ckpt_dir`) recorded
  /// its stamps, compared as CheckResume compares them: one entry per
  /// change ("data file F changed: size ..." or a field whose number of
  /// files differs), empty when none; *notes as CheckResume's. The files
  /// compared are this watch's (a watch over some fields compares those).
  std::vector<std::string> ChangesSince(const CheckpointManifest& manifest, const std::string& ckpt_dir,
                                        std::vector<std::string>* notes) const;

  /// Compares the stamps `manifest` (the checkpoint in `ckpt_dir`)
  /// recorded with this watch's, field by field, in order. A file at the
  /// same path must be unchanged (size, time, digest); a file at another
  /// path (copied or moved) must have the same size and digest, and is
  /// accepted with a line in *notes. A field whose number of files differs
  /// is a change; a field set on one side only is not compared (*notes
  /// says so). A manifest without stamps (written before they were
  /// recorded) is accepted, *notes saying the data could not be checked.
  /// Errors: FailedPrecondition "cannot resume from CKPT: data file F
  /// changed since the checkpoint: size ..." naming every change.
  Status CheckResume(const CheckpointManifest& manifest, const std::string& ckpt_dir,
                     std::vector<std::string>* notes) const;

  /// One digest per config field watched, in config order: a hash of its
  /// files' sizes and content digests, in order (not their paths or
  /// times, so a copy at another path gives the same). What HELLO carries
  /// (HelloBody.data_digests): workers of one job must read the same data.
  std::vector<std::pair<std::string, uint64_t>> FieldDigests() const;

  size_t size() const { return stamps_.size(); }
  const std::vector<WatchedFile>& files() const { return files_; }
  const std::vector<DataFileStamp>& stamps() const { return stamps_; }

 private:
  std::vector<WatchedFile> files_;
  std::vector<DataFileStamp> stamps_;  // files_[i]'s
};

}  // namespace tether
