// How tether-predict reads its input rows: their format (XMC or LIBSVM) and
// index base (of feature ids and XMC label ids), from its flags where they
// are given, else from the model's own config (data.format and
// data.index_base of the data it was trained on, which the model file
// records). A flag that contradicts the model is taken as the input's own
// (its ids are mapped onto the model's keys, and its labels written in its
// numbering), with a warning naming both values: an input in the model's
// base read under another base would score every feature as its neighbour.
//
// Ownership: values in, values out. Thread-safety: re-entrant.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "proto/config.pb.h"

namespace tether {

struct InputReading {
  FileFormat format = XMC;            // XMC or LIBSVM
  int index_base = 0;                 // 0 or 1
  std::vector<std::string> warnings;  // a flag that contradicts the model, one line each
  std::string source;                 // for the log: "format xmc (the model's), index base 0 (the model's)"
};

/// The reading of the input for a model whose config is `model` (file
/// `model_path`, for the messages), given `--format=format_flag` ("" when
/// not given; else "xmc" or "libsvm") and `--index_base=index_base_flag`
/// (-1 when not given; else 0 or 1). Errors: InvalidArgument naming the
/// flag when it is not given and the model cannot supply it (a model
/// trained on IDX or ARFF data: tether-predict reads XMC and LIBSVM text;
/// a model that records no index base).
StatusOr<InputReading> ResolveInputReading(const JobConfig& model, const std::string& model_path,
                                           const std::string& format_flag, int index_base_flag);

}  // namespace tether
