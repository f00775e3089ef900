// Job configs from Protobuf text: parsing with file:line errors and
// suggestions for unknown fields and enum values, loading from a file, and
// data paths taken against the config file's folder (core/config.h).
#include "core/config.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "core/config/config_internal.h"
#include "core/data_files.h"
#include "core/regular_file.h"

namespace tether {
namespace {

using config_internal::FirstErrorCollector;
using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Every field of the config tree with its dotted path ("consistency.staleness").
void CollectFieldPaths(const Descriptor* d, const std::string& prefix,
                       std::vector<std::pair<std::string, const FieldDescriptor*>>* out, int depth = 0) {
  if (depth > 4) return;
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    out->emplace_back(prefix + f->name(), f);
    if (f->type() == FieldDescriptor::TYPE_MESSAGE)
      CollectFieldPaths(f->message_type(), prefix + f->name() + ".", out, depth + 1);
  }
}

// " (did you mean 'x'?)" for an unknown field `word` met inside message
// `type`: the closest field of that message, or else the closest field
// anywhere in the config, then saying where it belongs. "" if none is close.
std::string SuggestField(const std::string& type, const std::string& word) {
  const Descriptor* scope = google::protobuf::DescriptorPool::generated_pool()->FindMessageTypeByName(type);
  if (scope != nullptr) {
    std::vector<std::string> local;
    for (int i = 0; i < scope->field_count(); ++i) local.push_back(scope->field(i)->name());
    const std::string guess = ClosestName(word, local);
    if (!guess.empty()) return " (did you mean '" + guess + "'?)";
  }
  std::vector<std::pair<std::string, const FieldDescriptor*>> all;
  CollectFieldPaths(JobConfig::descriptor(), "", &all);
  std::vector<std::string> names;
  for (const auto& [path, f] : all) names.push_back(f->name());
  const std::string guess = ClosestName(word, names);
  if (guess.empty()) return "";
  for (const auto& [path, f] : all) {
    if (f->name() != guess) continue;
    if (path.find('.') == std::string::npos) return " (did you mean '" + guess + "'?)";
    // "consistency.staleness" → "consistency { staleness: ... }"
    std::string nested, closing;
    size_t start = 0;
    for (size_t dot; (dot = path.find('.', start)) != std::string::npos; start = dot + 1) {
      nested += path.substr(start, dot - start) + " { ";
      closing += " }";
    }
    return " (did you mean '" + guess + "'? it belongs in " + nested + guess + ": ..." + closing + ")";
  }
  return "";
}

// " (did you mean 'X'?)" for an unknown enum value of a field named
// `field` (several messages may have one, e.g. model.type and optimizer.type:
// the value list is that of the enum holding the closest name).
std::string SuggestEnumValue(const std::string& field, const std::string& word) {
  std::vector<std::pair<std::string, const FieldDescriptor*>> all;
  CollectFieldPaths(JobConfig::descriptor(), "", &all);
  std::vector<const google::protobuf::EnumDescriptor*> enums;
  for (const auto& [path, f] : all)
    if (f->name() == field && f->type() == FieldDescriptor::TYPE_ENUM &&
        std::find(enums.begin(), enums.end(), f->enum_type()) == enums.end())
      enums.push_back(f->enum_type());
  std::string upper = word;
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  std::vector<std::string> names;
  for (const auto* e : enums)
    for (int i = 0; i < e->value_count(); ++i) names.push_back(e->value(i)->name());
  if (names.empty()) return "";
  // Case is the commonest slip ("adam" for ADAM): say so exactly.
  if (upper != word && std::find(names.begin(), names.end(), upper) != names.end())
    return " (did you mean '" + upper + "'? enum values are upper case)";
  const std::string guess = ClosestName(upper, names);
  std::string valid;
  for (const auto* e : enums) {
    if (!guess.empty() && e->FindValueByName(guess) == nullptr) continue;
    for (int i = 0; i < e->value_count(); ++i) valid += (valid.empty() ? "" : ", ") + e->value(i)->name();
  }
  return guess.empty() ? " (valid: " + valid + ")" : " (did you mean '" + guess + "'? valid: " + valid + ")";
}

// Protobuf reports some errors at the token after the culprit, which may sit
// on a later line ("type: ADAMW" then "}"): the line that holds `token` as a
// whole word, searching back from `line`, is the one to name.
int LineOfToken(const std::string& text, int line, const std::string& token) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  const auto word_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (int l = std::min<int>(line, static_cast<int>(lines.size())); l >= 1; --l) {
    const std::string& s = lines[l - 1];
    for (size_t at = s.find(token); at != std::string::npos; at = s.find(token, at + 1)) {
      const bool left = at == 0 || !word_char(s[at - 1]);
      const bool right = at + token.size() >= s.size() || !word_char(s[at + token.size()]);
      if (left && right) return l;
    }
  }
  return line;
}

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

// Repeated entries keyed by a name (a repeated message field whose type has
// a string field `name`, such as `table`) must name distinct things: text
// format would keep both and the lookup would silently use one. Checks every
// level of the tree; `tree` gives the 1-based lines from the text.
Status CheckRepeatedNamesUnique(const Message& msg,
                                const google::protobuf::TextFormat::ParseInfoTree* tree,
                                const std::string& file) {
  const Descriptor* d = msg.GetDescriptor();
  const Reflection* r = msg.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->type() != FieldDescriptor::TYPE_MESSAGE) continue;
    const FieldDescriptor* key = f->message_type()->FindFieldByName("name");
    // The line of the entry's field name ("table {"); the list syntax
    // ("table [{...}, {...}]") records none per entry, so there it is the
    // line of the entry's own `name`.
    const auto line_of = [&](int index) {
      if (tree == nullptr) return 0;
      int line = tree->GetLocation(f, f->is_repeated() ? index : -1).line;
      const auto* nested = tree->GetTreeForNested(f, f->is_repeated() ? index : -1);
      if (line < 0 && nested != nullptr && key != nullptr) line = nested->GetLocation(key, -1).line;
      return line + 1;
    };
    if (!f->is_repeated()) {
      if (!r->HasField(msg, f)) continue;
      TETHER_RETURN_IF_ERROR(CheckRepeatedNamesUnique(
          r->GetMessage(msg, f), tree ? tree->GetTreeForNested(f, -1) : nullptr, file));
      continue;
    }
    const bool keyed = key != nullptr && key->type() == FieldDescriptor::TYPE_STRING && !key->is_repeated();
    std::map<std::string, int> first_index;
    for (int k = 0; k < r->FieldSize(msg, f); ++k) {
      const Message& entry = r->GetRepeatedMessage(msg, f, k);
      if (keyed && entry.GetReflection()->HasField(entry, key)) {
        const std::string name = entry.GetReflection()->GetString(entry, key);
        const auto [it, fresh] = first_index.emplace(name, k);
        if (!fresh) {
          return Status::InvalidArgument(file + ":" + std::to_string(line_of(k)) + ": " + f->name() +
                                         " \"" + name + "\" is already configured at line " +
                                         std::to_string(line_of(it->second)));
        }
      }
      TETHER_RETURN_IF_ERROR(CheckRepeatedNamesUnique(
          entry, tree ? tree->GetTreeForNested(f, k) : nullptr, file));
    }
  }
  return Status::OK();
}

}  // namespace

std::string ClosestName(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 2) + 1;
  for (const auto& c : candidates) {
    size_t d = EditDistance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

StatusOr<JobConfig> ParseJobConfig(const std::string& text, const std::string& name) {
  // Editors on some systems save UTF-8 with a byte-order mark, which
  // Protobuf's text format reports only as "non ascii codepoint 239".
  if (text.rfind("\xEF\xBB\xBF", 0) == 0)
    return Status::InvalidArgument(name +
                                   ":1: the file starts with a UTF-8 byte-order mark (bytes EF BB BF), which "
                                   "Protobuf's text format does not read: save it without one (UTF-8 without "
                                   "BOM), e.g. sed -i '1s/^\\xEF\\xBB\\xBF//' " + name);
  JobConfig config;
  google::protobuf::TextFormat::Parser parser;
  FirstErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  google::protobuf::TextFormat::ParseInfoTree locations;
  parser.WriteLocationsTo(&locations);
  if (!parser.ParseFromString(text, &config)) {
    std::string msg = name + ":" + std::to_string(errors.line()) + ": " + errors.message();
    // Protobuf says: Message type "tether.JobConfig" has no field named "staleness_bond".
    static const std::regex kUnknown("Message type \"([^\"]+)\" has no field named \"([^\"]+)\"");
    static const std::regex kBadEnum("Unknown enumeration value of \"([^\"]+)\" for field \"([^\"]+)\"");
    std::smatch m;
    if (std::regex_search(errors.message(), m, kUnknown)) {
      msg = name + ":" + std::to_string(LineOfToken(text, errors.line(), m[2].str())) + ": unknown field '" +
            m[2].str() + "'" + SuggestField(m[1].str(), m[2].str());
    } else if (std::regex_search(errors.message(), m, kBadEnum)) {
      msg = name + ":" + std::to_string(LineOfToken(text, errors.line(), m[1].str())) + ": unknown value '" +
            m[1].str() + "' for field '" + m[2].str() + "'" + SuggestEnumValue(m[2].str(), m[1].str());
    } else if (const std::string& e = errors.message(); e.size() >= 5 && e.compare(e.size() - 5, 5, "got: ") == 0) {
      // Protobuf names the token it found, and at the end of the text there is none.
      msg += "(the end of the file: a value or a closing '}' is missing)";
    }
    return Status::InvalidArgument(msg);
  }
  TETHER_RETURN_IF_ERROR(CheckRepeatedNamesUnique(config, &locations, name));
  return config;
}

StatusOr<JobConfig> LoadJobConfig(const std::string& path) {
  std::error_code dir_ec;
  if (std::filesystem::is_directory(path, dir_ec))
    return Status::InvalidArgument(path + ": is a directory, not a config file (a .pbtxt job config)");
  // Never blocks (a FIFO is refused, not waited on) and never reads more
  // than a config may be (/dev/zero is refused, not read until memory ends).
  TETHER_ASSIGN_OR_RETURN(const std::string text, ReadRegularFile(path, kConfigFileMaxBytes, "config file"));
  TETHER_ASSIGN_OR_RETURN(JobConfig config, ParseJobConfig(text, path));
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::absolute(path, ec).parent_path();
  if (ec) return Status::IOError(path + ": cannot resolve the config file's folder: " + ec.message());
  ResolveDataPaths(&config, dir.string());
  return config;
}

void ResolveDataPaths(JobConfig* config, const std::string& base_dir) {
  if (!config->has_data()) return;
  DataConfig* d = config->mutable_data();
  const Reflection* r = d->GetReflection();
  for (const char* name : {"train_file", "test_file", "train_split", "test_split", "validation_split",
                           "train_label_file", "test_label_file", "label_xml"}) {
    const FieldDescriptor* f = d->GetDescriptor()->FindFieldByName(name);
    if (!r->HasField(*d, f)) continue;
    const std::string value = r->GetString(*d, f);
    const bool list_field = std::string(name) == "train_file" || std::string(name) == "test_file";
    if (list_field && IsFileList(value)) {  // each entry (core/data_files.h)
      r->SetString(d, f, ResolveFileList(value, base_dir));
      continue;
    }
    if (value.empty() || std::filesystem::path(value).is_absolute()) continue;
    r->SetString(d, f, (std::filesystem::path(base_dir) / value).lexically_normal().string());
  }
}

}  // namespace tether
