// MULAN's label XML: the file beside a multi-label ARFF that names which of
// its attributes are labels (<labels><label name="..."/>...</labels>, with
// namespaces, comments and nested hierarchies allowed). The ARFF reader
// (input/arff_reader.h) reads it for ReadOptions.label_xml.
//
// A small reader of exactly what such files hold, not an XML parser: tags,
// comments, processing instructions, the name attribute (quoted with ' or ")
// and the five predefined entities. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/memory_fit.h"
#include "core/status.h"

namespace tether {

/// One <label> element: its name attribute (entities decoded) and the
/// 1-based line it starts on.
struct XmlLabel {
  std::string name;
  int64_t line;
};

/// The <label> elements of the file at `path` (gzip or plain), in file
/// order. Errors: the read's; InvalidArgument naming path:line for an
/// unterminated tag or comment, a <label> without a name, a name listed
/// twice; InvalidArgument when there is no <label> at all; a file larger,
/// plain or inflated, than `budget` (as ReadOptions::memory_budget; bytes
/// 0: the process's own) is refused as input/read_budget.h words it.
StatusOr<std::vector<XmlLabel>> ParseLabelXml(const std::string& path, const MemoryBudget& budget = {});

}  // namespace tether
