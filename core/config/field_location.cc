#include "core/config/field_location.h"

#include <google/protobuf/descriptor.h>

#include <optional>
#include <vector>

#include "core/config/config_internal.h"

namespace tether {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using ParseInfoTree = google::protobuf::TextFormat::ParseInfoTree;

// One step of a path: "consistency", or "table[w1]" (field and entry name).
struct Step {
  std::string field;
  std::optional<std::string> name;
};

// "table[w1].consistency.staleness" -> table[w1], consistency, staleness.
// A name may hold dots ("table[a.b]"), so the brackets are read first.
std::optional<std::vector<Step>> SplitPath(const std::string& path) {
  std::vector<Step> steps;
  size_t at = 0;
  while (at <= path.size()) {
    Step step;
    const size_t end = path.find_first_of(".[", at);
    step.field = path.substr(at, end == std::string::npos ? std::string::npos : end - at);
    if (step.field.empty()) return std::nullopt;
    at = end;
    if (at != std::string::npos && path[at] == '[') {
      const size_t close = path.find(']', at);
      if (close == std::string::npos) return std::nullopt;
      step.name = path.substr(at + 1, close - at - 1);
      at = close + 1;
      if (at < path.size() && path[at] != '.') return std::nullopt;
    }
    steps.push_back(std::move(step));
    if (at == std::string::npos || at >= path.size()) break;
    ++at;  // past the dot
    if (at == path.size()) return std::nullopt;  // "optimizer."
  }
  return steps;
}

// The entry of repeated message field `f` in `msg` that `step` means: the one
// whose `name` is step.name, or, unnamed, the only one. -1 if none.
int EntryIndex(const Message& msg, const FieldDescriptor* f, const Step& step) {
  const int size = msg.GetReflection()->FieldSize(msg, f);
  if (!step.name) return size == 1 ? 0 : -1;
  if (f->type() != FieldDescriptor::TYPE_MESSAGE) return -1;
  const FieldDescriptor* key = f->message_type()->FindFieldByName("name");
  if (key == nullptr || key->type() != FieldDescriptor::TYPE_STRING || key->is_repeated()) return -1;
  for (int k = 0; k < size; ++k) {
    const Message& entry = msg.GetReflection()->GetRepeatedMessage(msg, f, k);
    if (entry.GetReflection()->GetString(entry, key) == *step.name) return k;
  }
  return -1;
}

// The earliest 0-based line of any field written in `tree` (a message of
// type `d`), or -1.
int FirstLineIn(const ParseInfoTree& tree, const google::protobuf::Descriptor* d) {
  int first = -1;
  for (int i = 0; i < d->field_count(); ++i) {
    const int line = tree.GetLocation(d->field(i), d->field(i)->is_repeated() ? 0 : -1).line;
    if (line >= 0 && (first < 0 || line < first)) first = line;
  }
  return first;
}

// 1-based line of value `index` of `f` (-1: not repeated), or -1.
// Protobuf records a position per occurrence of the field's name, so a list
// ("table [{...}, {...}]") has one for all its entries and shifts the
// entries after it: when there are fewer positions than entries, an entry's
// line is that of the first field written in it.
int ValueLine(const ParseInfoTree& tree, const FieldDescriptor* f, int index, int size) {
  const bool one_per_entry = index < 0 || f->type() != FieldDescriptor::TYPE_MESSAGE ||
                             (tree.GetLocation(f, size - 1).line >= 0 && tree.GetLocation(f, size).line < 0);
  int line = one_per_entry ? tree.GetLocation(f, index).line : -1;
  if (line < 0 && f->type() == FieldDescriptor::TYPE_MESSAGE && index >= 0) {
    const ParseInfoTree* nested = tree.GetTreeForNested(f, index);
    if (nested != nullptr) line = FirstLineIn(*nested, f->message_type());
  }
  return line < 0 ? -1 : line + 1;  // the parser counts lines from 0
}

}  // namespace

ConfigFieldLocator::ConfigFieldLocator() : tree_(std::make_unique<ParseInfoTree>()) {}

StatusOr<ConfigFieldLocator> ConfigFieldLocator::FromText(const std::string& text) {
  ConfigFieldLocator locator;
  google::protobuf::TextFormat::Parser parser;
  config_internal::FirstErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(locator.tree_.get());
  if (!parser.ParseFromString(text, &locator.config_))
    return Status::InvalidArgument("line " + std::to_string(errors.line()) + ": " + errors.message());
  return locator;
}

int ConfigFieldLocator::LineOf(const std::string& path) const {
  const std::optional<std::vector<Step>> steps = SplitPath(path);
  if (!steps) return -1;
  const Message* msg = &config_;
  const ParseInfoTree* tree = tree_.get();
  for (size_t i = 0; i < steps->size(); ++i) {
    const Step& step = (*steps)[i];
    const FieldDescriptor* f = msg->GetDescriptor()->FindFieldByName(step.field);
    if (f == nullptr || (step.name && !f->is_repeated())) return -1;
    const bool last = i + 1 == steps->size();
    // A repeated field named at the end, no entry named: where it is first written.
    if (last && f->is_repeated() && !step.name) {
      const int line = tree->GetLocation(f, 0).line;
      return line < 0 ? -1 : line + 1;
    }
    const int size = f->is_repeated() ? msg->GetReflection()->FieldSize(*msg, f) : 0;
    const int index = f->is_repeated() ? EntryIndex(*msg, f, step) : -1;
    if (f->is_repeated() && index < 0) return -1;
    if (last) return ValueLine(*tree, f, index, size);
    if (f->type() != FieldDescriptor::TYPE_MESSAGE) return -1;
    tree = tree->GetTreeForNested(f, index);
    if (tree == nullptr) return -1;
    msg = f->is_repeated() ? &msg->GetReflection()->GetRepeatedMessage(*msg, f, index)
                           : &msg->GetReflection()->GetMessage(*msg, f);
  }
  return -1;
}

}  // namespace tether
