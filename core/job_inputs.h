// The files a job reads, named by the flag or config field that gives them,
// so that an output path can be checked against them (core/output_target.h
// CheckOutputNotInput) before anything is written.
//
// Ownership: none. Thread-safety: pure function of its arguments and the
// file system (glob patterns of data-file lists are expanded).
#pragma once

#include <string>
#include <vector>

#include "core/output_target.h"
#include "proto/config.pb.h"

namespace tether {

/// The job's config file (`config_path`, "flag --config"; skipped when
/// empty), the flag file (`flagfile`, "flag --flagfile"; a comma-separated
/// list as gflags takes it) and every data file `config` names: the
/// entries of data.train_file and data.test_file (lists and patterns
/// expanded; a list that cannot be expanded is left to the data checks),
/// the splits and the label files; then the checkpoint the run resumes
/// from (`resume_from`, "flag --resume_from"; skipped when empty), a folder
/// that stands for every file under it.
std::vector<NamedInput> JobInputs(const std::string& config_path, const std::string& flagfile,
                                  const JobConfig& config, const std::string& resume_from);

/// The start-up check of a run's outputs (flag or field, path; empty paths
/// skipped): none is one of `inputs` (CheckOutputNotInput), and no two are
/// the same file (device and inode when both exist; else the same path once
/// links are followed and the path made absolute). Character devices and
/// FIFOs written through (/dev/null) are never the same file as another
/// output. Errors: InvalidArgument naming the output flag and the input, or
/// "SOURCE=PATH and SOURCE2=PATH2 are the same file: ...".
[[nodiscard]] Status CheckOutputs(const std::vector<NamedInput>& outputs, const std::vector<NamedInput>& inputs);

}  // namespace tether
