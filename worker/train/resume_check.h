// What a resume may not change, checked against the job's config before
// any process connects: a checkpoint's tables (shapes, optimizer types),
// how its rows were read into the model (the input transform), which
// rows were set aside for validation, and the epochs it has trained
// against train.epochs (resume_epochs.h). One check for tether-launch (before
// it starts a process), tether-worker (before it reads data or connects:
// exit 2, a refusal no restart cures) and the worker's resume itself.
//
// Ownership: none. Thread-safety: reads files only; safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "proto/config.pb.h"
#include "proto/tables.pb.h"

namespace tether {

/// Why `config` (whose tables are `tables`, TablesForJob) may not resume
/// the checkpoint of `manifest`: "" when it may, else the first difference,
/// e.g. "table 'w1', field dim: the checkpoint has 256, the job has 128 (a
/// table's shape and optimizer type cannot change on resume)"
/// (DiffTableShapes, DiffInputTransform, DiffValidationRows; the last two
/// only for a manifest that records its config).
std::string ResumeConfigDiff(const CheckpointManifest& manifest, const JobConfig& config,
                             const std::vector<TableSpec>& tables);

/// Resolves `resume_from` (a checkpoint, or a folder holding one), reads its
/// MANIFEST and compares it with `config` (ResumeConfigDiff), then its
/// epochs with train.epochs (ResumeEpochsDiff, reading the workers' states
/// and chunks.state). OK when `resume_from` is empty, and when no manifest
/// or state can be read there: that is the resume's to refuse, naming the
/// file (CheckCheckpointPaths, ReadManifest, ReadWorkerState). Errors:
/// FailedPrecondition "cannot resume from DIR: DIFF".
[[nodiscard]] Status CheckResumeConfig(const JobConfig& config, const std::string& resume_from);

}  // namespace tether
