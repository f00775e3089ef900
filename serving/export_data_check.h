// Whether the training data at hand is the data a checkpoint's job trained
// on, checked before tether-export counts from it. An export reads the
// training rows for two things: the label frequencies PSP@k weighs by
// (multi-label models, --label_counts) and data.tf_idf's weights, which
// every row tether-predict scores is multiplied by. Counted from changed
// files, both would differ from training's without a word, so the export
// compares the training files with the stamps the checkpoint's MANIFEST
// recorded, as a resume does (worker/train/data_watch.h: size,
// modification time and an XXH3-64 of both 64 KiB ends of each file).
//
// The files compared are the training side of the config: data.train_file's
// files, train_label_file, train_split, validation_split and label_xml.
// The test files are not: an export does not read them.
//
// Thread-safety: the functions share no state.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "proto/config.pb.h"

namespace tether {

/// Whether exporting a model of `config` reads its training data: the
/// label counts of a multi-label model (when `with_label_counts`), or
/// data.tf_idf's weights.
bool ExportReadsTrainingData(const JobConfig& config, bool with_label_counts);

/// OK when every training file of `config` is the file the checkpoint in
/// `ckpt_dir` (whose manifest is `manifest`) recorded: at the same path
/// unchanged, or at another path with the same size and content digest (a
/// copy or a move; a line in *notes says so). A manifest without stamps is
/// accepted, *notes saying the data could not be checked.
/// Errors: FailedPrecondition "cannot export from CKPT: data file F changed
/// since the checkpoint: ..." naming every change and what to do; NotFound
/// "cannot export from CKPT: data file F: no such file; ..." with the same
/// remedy for a training file that is gone (an expanded data.train_file
/// pattern that matches nothing too); IOError naming a training file that
/// cannot be read.
Status CheckExportData(const JobConfig& config, const CheckpointManifest& manifest, const std::string& ckpt_dir,
                       std::vector<std::string>* notes);

}  // namespace tether
