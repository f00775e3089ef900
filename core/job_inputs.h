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
/// the splits and the label files.
std::vector<NamedInput> JobInputs(const std::string& config_path, const std::string& flagfile,
                                  const JobConfig& config);

}  // namespace tether
