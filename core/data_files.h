// Data-file lists: the value of data.train_file / data.test_file may name
// several files, comma-separated, each entry a path or a glob pattern
// (glob(3): *, ?, [...]; a pattern's matches come in name order). This is
// where such a value is split, resolved against a folder and expanded, so
// that the config loader, the start-up checks and the readers agree on
// which files a job reads (docs/OPERATIONS.md, "Many files, streamed").
//
// A value with no comma and no glob character is one file, exactly as
// before. Commas therefore cannot appear in data file names.
//
// Pure functions of their inputs and the file system; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace tether {

/// True when `spec` names more than one file or a pattern: it holds a comma
/// or a glob character (*, ?, [).
bool IsFileList(const std::string& spec);

/// The comma-separated entries of `spec`, each trimmed of surrounding
/// whitespace, in order; empty entries are kept (as "") so that callers can
/// refuse them. "a.txt" -> {"a.txt"}.
std::vector<std::string> SplitFileList(const std::string& spec);

/// `spec` with every relative entry made base_dir/entry (lexically normal);
/// absolute entries stay. Patterns are resolved the same way, not expanded.
std::string ResolveFileList(const std::string& spec, const std::string& base_dir);

/// The files `spec` names: each entry as it is, or a pattern's matches in
/// name order; duplicates (the same path named twice, by two entries or two
/// patterns) are refused, since a row would then be read twice. Existence
/// of plain entries is not checked here (CheckDataFilesExist does that).
/// `field` names the config field in messages ("data.train_file").
/// Errors: InvalidArgument "config field data.train_file: entry 2 of
/// 'a, ,b' is empty", "... names '/x/a.gz' twice"; NotFound "config field
/// data.train_file: the pattern 'part-*.gz' matches no file (looked in
/// /abs/dir)"; IOError when glob(3) fails reading a folder.
StatusOr<std::vector<std::string>> ExpandFileList(const std::string& spec, const std::string& field);

}  // namespace tether
