// ExpositionProblems: checks a /metrics page against the Prometheus text
// format's structural rules (version 0.0.4), for the tests of the pages'
// renderers: every sample follows its family's # HELP and # TYPE lines; no
// family appears twice; counter samples end in _total; histogram samples
// are NAME_bucket (with le, ascending, cumulative, ending in +Inf equal to
// NAME_count), NAME_sum and NAME_count; every line ends in a newline.
// Returns the problems found, one per line ("" when none).
// Thread-safety: a pure function.
#pragma once

#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>

namespace tether::testing {

inline std::string ExpositionProblems(const std::string& text) {
  std::ostringstream problems;
  if (!text.empty() && text.back() != '\n') problems << "text does not end in a newline\n";
  std::istringstream in(text);
  std::string line, family, type;
  std::set<std::string> seen;
  bool help_seen = false;
  std::map<std::string, double> last_bucket;  // series (labels less le) → last cumulative count
  std::map<std::string, double> last_le;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    const std::string where = "line " + std::to_string(n) + ": ";
    if (line.rfind("# HELP ", 0) == 0) {
      family = line.substr(7, line.find(' ', 7) - 7);
      if (!seen.insert(family).second) problems << where << "family " << family << " appears twice\n";
      help_seen = true;
      type.clear();
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      const std::string name = line.substr(7, line.find(' ', 7) - 7);
      type = line.substr(line.rfind(' ') + 1);
      if (name != family || !help_seen) problems << where << "TYPE of " << name << " not right after its HELP\n";
      if (type == "counter" && (name.size() < 6 || name.compare(name.size() - 6, 6, "_total") != 0))
        problems << where << "counter " << name << " does not end in _total\n";
      continue;
    }
    if (line.empty() || line[0] == '#') {
      problems << where << "unexpected line '" << line << "'\n";
      continue;
    }
    const size_t name_end = line.find_first_of("{ ");
    const std::string name = line.substr(0, name_end);
    const size_t value_at = line.rfind(' ');
    const std::string value = line.substr(value_at + 1);
    if (type.empty()) problems << where << "sample " << name << " before any TYPE\n";
    if (type == "histogram") {
      const std::string suffix = name.size() > family.size() ? name.substr(family.size()) : "";
      if (name.rfind(family, 0) != 0 || (suffix != "_bucket" && suffix != "_sum" && suffix != "_count"))
        problems << where << "sample " << name << " is not part of histogram " << family << "\n";
      std::string labels = name_end < value_at ? line.substr(name_end, value_at - name_end) : "";
      if (suffix == "_bucket") {
        // The le label, not the end of another name ("role").
        size_t le = labels.find(",le=\"");
        if (le == std::string::npos) le = labels.find("{le=\"");
        if (le == std::string::npos) {
          problems << where << "bucket without le\n";
          continue;
        }
        ++le;
        const std::string bound = labels.substr(le + 4, labels.find('"', le + 4) - le - 4);
        std::string series = labels.substr(0, le);
        const double b = bound == "+Inf" ? INFINITY : std::stod(bound);
        const double v = std::stod(value);
        if (last_le.count(series) && b <= last_le[series]) problems << where << "le not ascending\n";
        if (last_bucket.count(series) && v < last_bucket[series]) problems << where << "buckets not cumulative\n";
        last_le[series] = b;
        last_bucket[series] = v;
      }
    } else if (name != family) {
      problems << where << "sample " << name << " under family " << family << "\n";
    }
  }
  return problems.str();
}

}  // namespace tether::testing
