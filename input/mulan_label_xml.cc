// The label XML of MULAN data sets (input/mulan_label_xml.h).
#include "input/mulan_label_xml.h"

#include <string_view>
#include <unordered_map>

#include "input/file_input.h"
#include "input/read_budget.h"
#include "input/text_parse.h"

namespace tether {
namespace {

using text::At;
using text::IsSpace;
using text::Quote;

std::string DecodeEntities(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    const size_t semi = s.find(';', i);
    const std::string_view ent = semi == std::string_view::npos ? std::string_view() : s.substr(i + 1, semi - i - 1);
    char c = 0;
    if (ent == "amp") c = '&';
    else if (ent == "lt") c = '<';
    else if (ent == "gt") c = '>';
    else if (ent == "quot") c = '"';
    else if (ent == "apos") c = '\'';
    if (c == 0) {
      out += '&';
      continue;
    }
    out += c;
    i = semi;
  }
  return out;
}

}  // namespace

StatusOr<std::vector<XmlLabel>> ParseLabelXml(const std::string& path, const MemoryBudget& budget) {
  const MemoryBudget bound = ResolveReadBudget(budget);
  std::string raw, storage;
  TETHER_RETURN_IF_ERROR(ReadFileBytes(path, &raw, bound));
  TETHER_ASSIGN_OR_RETURN(std::string_view s, DecodeInput(path, raw, &storage, bound));
  std::vector<XmlLabel> out;
  std::unordered_map<std::string, int64_t> seen;
  size_t pos = 0;
  while ((pos = s.find('<', pos)) != std::string_view::npos) {
    const int64_t line = text::LineOfOffset(s, pos);
    auto close = [&](std::string_view end_mark, const char* what) -> StatusOr<size_t> {
      const size_t e = s.find(end_mark, pos);
      if (e == std::string_view::npos)
        return Status::InvalidArgument(At(path, line) + "unterminated " + what);
      return e + end_mark.size();
    };
    if (s.compare(pos, 4, "<!--") == 0) {
      TETHER_ASSIGN_OR_RETURN(pos, close("-->", "comment"));
      continue;
    }
    if (s.compare(pos, 2, "<?") == 0) {
      TETHER_ASSIGN_OR_RETURN(pos, close("?>", "processing instruction"));
      continue;
    }
    TETHER_ASSIGN_OR_RETURN(const size_t end, close(">", "tag"));
    std::string_view tag = s.substr(pos + 1, end - pos - 2);
    pos = end;
    if (tag.empty() || tag[0] == '/' || tag[0] == '!') continue;
    size_t n = 0;
    while (n < tag.size() && !IsSpace(tag[n]) && tag[n] != '/' && tag[n] != '\n') ++n;
    std::string_view elem = tag.substr(0, n);
    if (const size_t colon = elem.rfind(':'); colon != std::string_view::npos) elem.remove_prefix(colon + 1);
    if (elem != "label") continue;
    // The name attribute: name="..." or name='...', any spacing.
    std::string_view attrs = tag.substr(n);
    std::string name;
    bool found = false;
    for (size_t i = 0; i < attrs.size();) {
      while (i < attrs.size() && (IsSpace(attrs[i]) || attrs[i] == '\n' || attrs[i] == '/')) ++i;
      size_t k = i;
      while (k < attrs.size() && attrs[k] != '=' && !IsSpace(attrs[k]) && attrs[k] != '\n') ++k;
      const std::string_view key = attrs.substr(i, k - i);
      while (k < attrs.size() && (IsSpace(attrs[k]) || attrs[k] == '\n')) ++k;
      if (k >= attrs.size() || attrs[k] != '=') break;
      ++k;
      while (k < attrs.size() && (IsSpace(attrs[k]) || attrs[k] == '\n')) ++k;
      if (k >= attrs.size() || (attrs[k] != '"' && attrs[k] != '\'')) break;
      const size_t q = attrs.find(attrs[k], k + 1);
      if (q == std::string_view::npos) break;
      if (key == "name") {
        name = DecodeEntities(attrs.substr(k + 1, q - k - 1));
        found = true;
        break;
      }
      i = q + 1;
    }
    if (!found) return Status::InvalidArgument(At(path, line) + "<label> without a name attribute");
    if (auto [it, fresh] = seen.emplace(name, line); !fresh)
      return Status::InvalidArgument(At(path, line) + "label " + Quote(name) + " is listed twice (also on line " +
                                     std::to_string(it->second) + ")");
    out.push_back({name, line});
  }
  if (out.empty()) return Status::InvalidArgument(path + ": no <label> elements found (not a MULAN label XML file?)");
  return out;
}

}  // namespace tether
