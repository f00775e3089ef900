// ConfigFieldLocator: the line of a job config's text where a field is
// written, for errors found after parsing ("bad.pbtxt:44: config field
// optimizer.learning_rate: must be a finite number > 0").
//
// Why: the checks (ValidateJobConfig, ValidateModelConfig) run on the parsed
// JobConfig, after flags and data headers have filled it in, and name a
// field by its dotted path; by then the text's positions are gone. This keeps
// them: it parses the text once more with Protobuf's text format recording
// every field's position (TextFormat::ParseInfoTree), and walks that tree
// along the path. No text format of its own.
//
// Paths are those of the "config field PATH:" messages: field names joined
// by dots ("train.early_stopping.metric"), where a repeated message may be
// named by its `name` field in brackets ("table[w1].consistency.staleness").
// A repeated message without a name ("table.name") is followed only when the
// text holds exactly one entry of it (with several, which one a message means
// is not known); a repeated field at the end of the path gives the line
// where its name is first written.
//
// Errors: FromText returns InvalidArgument when the text does not parse (the
// config it came from did, so that means the text is not that config's).
// LineOf returns -1, never an error, for a field the text does not write (a
// default, or a value set by a flag or a data header), an unknown path, or
// an ambiguous one.
//
// Ownership and thread-safety: a locator owns its parsed copy and its tree;
// immutable after FromText, so const calls may run from any thread.
#pragma once

#include <google/protobuf/text_format.h>

#include <memory>
#include <string>

#include "core/status.h"
#include "proto/config.pb.h"

namespace tether {

class ConfigFieldLocator {
 public:
  /// Parses `text`, a JobConfig in Protobuf text format, keeping where each
  /// field is written. Errors: InvalidArgument "line N: why" when the text
  /// does not parse.
  static StatusOr<ConfigFieldLocator> FromText(const std::string& text);

  /// The 1-based line of `text` where the field at dotted `path` is written
  /// (for a message, the line of its name: "optimizer {"), or -1 when it is
  /// not written there, not a field, or not one entry (see above). Pure.
  int LineOf(const std::string& path) const;

 private:
  ConfigFieldLocator();

  JobConfig config_;
  std::unique_ptr<google::protobuf::TextFormat::ParseInfoTree> tree_;
};

}  // namespace tether
