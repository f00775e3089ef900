#include "input/arff_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <glog/logging.h>

#include "input/file_input.h"
#include "input/mulan_label_xml.h"
#include "input/read_budget.h"
#include "input/text_parse.h"

namespace tether {
namespace {

using text::At;
using text::IsSpace;
using text::NumKind;
using text::NumKindText;
using text::ParseFloat;
using text::ParseUint;
using text::Quote;
using text::UintParse;

constexpr uint64_t kMaxDim = std::numeric_limits<uint32_t>::max();
constexpr size_t kReadChunk = size_t{256} << 10;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

// Lines of a file or of bytes in memory, one at a time, without the '\n'.
class LineSource {
 public:
  virtual ~LineSource() = default;
  // Sets *line (valid until the next call) and returns true, or returns
  // false at the end or on an error (then status() is not OK).
  virtual bool Next(std::string_view* line) = 0;
  const Status& status() const { return status_; }
  int64_t line_no() const { return line_no_; }

 protected:
  Status status_;
  int64_t line_no_ = 0;
};

class MemoryLines : public LineSource {
 public:
  explicit MemoryLines(std::string_view s) : s_(s) {}
  bool Next(std::string_view* line) override {
    if (pos_ >= s_.size()) return false;
    const size_t nl = s_.find('\n', pos_);
    const size_t end = nl == std::string_view::npos ? s_.size() : nl;
    *line = s_.substr(pos_, end - pos_);
    pos_ = end + 1;
    ++line_no_;
    return true;
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

// zlib's gzread reads gzip and plain files alike, so the file is inflated
// piece by piece and never held whole.
class FileLines : public LineSource {
 public:
  // `budget` (resolved) bounds the longest line held.
  static StatusOr<std::unique_ptr<FileLines>> Open(const std::string& path, const MemoryBudget& budget) {
    // The magic-byte checks need the first bytes; refuse xz & co. as the
    // other readers do before a byte is parsed.
    TETHER_ASSIGN_OR_RETURN(FILE* f, OpenDataFile(path));
    char head[8] = {};
    const size_t n = std::fread(head, 1, sizeof head, f);
    std::fclose(f);
    if (!IsGzip(std::string_view(head, n))) TETHER_RETURN_IF_ERROR(text::CheckIsText(path, std::string_view(head, n)));
    gzFile gz = gzopen(path.c_str(), "rb");
    if (gz == nullptr) return Status::IOError(path + ": cannot open: " + std::strerror(errno));
    gzbuffer(gz, static_cast<unsigned>(kReadChunk));
    return std::unique_ptr<FileLines>(new FileLines(path, gz, budget));
  }
  ~FileLines() override { gzclose(gz_); }

  bool Next(std::string_view* line) override {
    if (!status_.ok()) return false;
    while (true) {
      const size_t nl = buf_.find('\n', pos_);
      if (nl != std::string::npos) return Emit(nl, nl + 1, line);
      if (eof_) {
        if (pos_ >= buf_.size()) return false;
        return Emit(buf_.size(), buf_.size(), line);
      }
      buf_.erase(0, pos_);
      pos_ = 0;
      const size_t old = buf_.size();
      // A line without end (a gzip bomb of one line) would grow the buffer
      // until memory runs out.
      if (old + kReadChunk > ReadLimitBytes(budget_)) {
        status_ = DataFileTooLarge(path_, "line " + std::to_string(line_no_ + 1) + " is longer than", budget_);
        return false;
      }
      buf_.resize(old + kReadChunk);
      const int got = gzread(gz_, &buf_[old], static_cast<unsigned>(kReadChunk));
      if (got < 0) {
        int code = 0;
        const char* msg = gzerror(gz_, &code);
        status_ = code == Z_BUF_ERROR ? Status::DataLoss(path_ + ": truncated gzip stream")
                                      : Status::DataLoss(path_ + ": corrupt gzip stream: " + msg);
        return false;
      }
      buf_.resize(old + static_cast<size_t>(got));
      if (got == 0) {
        int code = 0;
        gzerror(gz_, &code);
        if (code == Z_BUF_ERROR) {
          status_ = Status::DataLoss(path_ + ": truncated gzip stream");
          return false;
        }
        eof_ = true;
      }
    }
  }

 private:
  FileLines(std::string path, gzFile gz, MemoryBudget budget)
      : path_(std::move(path)), gz_(gz), budget_(std::move(budget)) {}
  bool Emit(size_t end, size_t next, std::string_view* line) {
    *line = std::string_view(buf_).substr(pos_, end - pos_);
    pos_ = next;
    ++line_no_;
    if (std::memchr(line->data(), '\0', line->size()) != nullptr) {
      status_ = Status::InvalidArgument(At(path_, line_no_) + "binary data (NUL byte): not a text data file");
      return false;
    }
    return true;
  }
  std::string path_;
  gzFile gz_;
  MemoryBudget budget_;
  std::string buf_;
  size_t pos_ = 0;
  bool eof_ = false;
};

// Splits on `sep` outside quotes; quotes are ' or " with backslash escapes.
std::vector<std::string_view> SplitOutsideQuotes(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  char quote = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quote != 0) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == sep) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  out.push_back(s.substr(start));
  return out;
}

// A value or name token, trimmed and unquoted. Returns false when a quote is
// not closed or text follows the closing quote.
bool Unquote(std::string_view tok, std::string* out) {
  tok = Trim(tok);
  out->clear();
  if (tok.empty() || (tok[0] != '\'' && tok[0] != '"')) {
    out->assign(tok);
    return true;
  }
  const char q = tok[0];
  for (size_t i = 1; i < tok.size(); ++i) {
    char c = tok[i];
    if (c == '\\' && i + 1 < tok.size()) {
      c = tok[++i];
      switch (c) {
        case 'n': c = '\n'; break;
        case 't': c = '\t'; break;
        case 'r': c = '\r'; break;
        default: break;
      }
      *out += c;
    } else if (c == q) {
      return i + 1 == tok.size();
    } else {
      *out += c;
    }
  }
  return false;
}

// Reads a leading name (quoted or not) from `s`; *rest is what follows.
bool TakeName(std::string_view s, std::string* name, std::string_view* rest) {
  s = Trim(s);
  if (s.empty()) return false;
  if (s[0] == '\'' || s[0] == '"') {
    for (size_t i = 1; i < s.size(); ++i) {
      if (s[i] == '\\') {
        ++i;
      } else if (s[i] == s[0]) {
        if (!Unquote(s.substr(0, i + 1), name)) return false;
        *rest = s.substr(i + 1);
        return true;
      }
    }
    return false;
  }
  size_t i = 0;
  while (i < s.size() && !IsSpace(s[i]) && s[i] != '{') ++i;
  name->assign(s.substr(0, i));
  *rest = s.substr(i);
  return true;
}

struct Attribute {
  std::string name;
  int64_t line = 0;
  bool nominal = false;
  std::vector<std::string> values;         // nominal values, unquoted
  std::unordered_map<std::string, float> value_of;  // nominal feature: value -> number
  bool is_label = false;
  uint32_t col = 0;  // feature or label column
};

struct Schema {
  std::string relation;
  std::vector<Attribute> attrs;
  uint64_t num_features = 0;
  uint64_t num_labels = 0;
  int64_t data_line = 0;  // line of @data
};

// Parses one "@attribute NAME TYPE" line's remainder.
Status ParseAttribute(const std::string& path, int64_t line, std::string_view rest, Attribute* a) {
  std::string_view type;
  if (!TakeName(rest, &a->name, &type) || a->name.empty())
    return Status::InvalidArgument(At(path, line) + "@attribute without a name (or an unclosed quote): " +
                                   Quote(Trim(rest)));
  a->line = line;
  type = Trim(type);
  if (!type.empty() && type[0] == '{') {
    if (type.back() != '}')
      return Status::InvalidArgument(At(path, line) + "nominal attribute " + Quote(a->name) +
                                     ": the value list " + Quote(type) + " does not end with '}'");
    a->nominal = true;
    for (std::string_view v : SplitOutsideQuotes(type.substr(1, type.size() - 2), ',')) {
      std::string value;
      if (!Unquote(v, &value))
        return Status::InvalidArgument(At(path, line) + "nominal attribute " + Quote(a->name) +
                                       ": malformed value " + Quote(Trim(v)));
      a->values.push_back(value);
    }
    return Status::OK();
  }
  if (IEquals(type, "numeric") || IEquals(type, "real") || IEquals(type, "integer")) return Status::OK();
  std::string_view word = type.substr(0, std::min(type.find_first_of(" \t"), type.size()));
  if (IEquals(word, "string") || IEquals(word, "date") || IEquals(word, "relational"))
    return Status::InvalidArgument(At(path, line) + "attribute " + Quote(a->name) + " has type " + Quote(type) +
                                   ", which Tether does not read (numeric, real, integer or a nominal {...} list)");
  return Status::InvalidArgument(At(path, line) + "attribute " + Quote(a->name) + " has an unknown type " +
                                 Quote(type) + " (expected numeric, real, integer or a nominal {...} list)");
}

// Reads the header through @data and assigns the columns.
Status ReadSchema(const std::string& path, LineSource* src, const ReadOptions& opts, Schema* schema) {
  std::string_view line;
  bool first = true;
  std::unordered_map<std::string, size_t> by_name;
  while (src->Next(&line)) {
    if (first && line.size() >= 3 && line.compare(0, 3, "\xef\xbb\xbf") == 0) line.remove_prefix(3);
    first = false;
    const std::string_view t = Trim(line);
    if (t.empty() || t[0] == '%') continue;
    const int64_t ln = src->line_no();
    size_t k = 0;
    while (k < t.size() && !IsSpace(t[k])) ++k;
    const std::string_view kw = t.substr(0, k);
    if (IEquals(kw, "@relation")) {
      std::string_view rest;
      if (!TakeName(t.substr(k), &schema->relation, &rest))
        return Status::InvalidArgument(At(path, ln) + "malformed @relation line " + Quote(t));
    } else if (IEquals(kw, "@attribute")) {
      Attribute a;
      TETHER_RETURN_IF_ERROR(ParseAttribute(path, ln, t.substr(k), &a));
      if (auto [it, fresh] = by_name.emplace(a.name, schema->attrs.size()); !fresh)
        return Status::InvalidArgument(At(path, ln) + "attribute " + Quote(a.name) + " is declared twice (also on line " +
                                       std::to_string(schema->attrs[it->second].line) + ")");
      schema->attrs.push_back(std::move(a));
    } else if (IEquals(kw, "@data")) {
      schema->data_line = ln;
      break;
    } else {
      return Status::InvalidArgument(At(path, ln) + "expected @relation, @attribute or @data, got " + Quote(t));
    }
  }
  TETHER_RETURN_IF_ERROR(src->status());
  if (schema->data_line == 0)
    return Status::InvalidArgument(path + ": missing @data: the file ends at line " + std::to_string(src->line_no()) +
                                   " without the @data line that starts the rows");
  if (schema->attrs.empty())
    return Status::InvalidArgument(At(path, schema->data_line) + "@data before any @attribute");

  // Which attributes are labels.
  auto& attrs = schema->attrs;
  if (!opts.label_xml.empty()) {
    TETHER_ASSIGN_OR_RETURN(std::vector<XmlLabel> labels, ParseLabelXml(opts.label_xml, opts.memory_budget));
    for (const XmlLabel& l : labels) {
      const auto it = by_name.find(l.name);
      if (it == by_name.end())
        return Status::InvalidArgument(At(opts.label_xml, l.line) + "label " + Quote(l.name) +
                                       " is not an attribute of " + path + " (unknown attribute)");
      attrs[it->second].is_label = true;
    }
    if (opts.num_labels > 0 && static_cast<uint64_t>(opts.num_labels) != labels.size())
      return Status::InvalidArgument(opts.label_xml + ": names " + std::to_string(labels.size()) +
                                     " labels but num_labels is " + std::to_string(opts.num_labels));
  } else if (opts.num_labels > 0) {
    if (static_cast<uint64_t>(opts.num_labels) > attrs.size())
      return Status::InvalidArgument(path + ": num_labels is " + std::to_string(opts.num_labels) + " but the header declares only " +
                                     std::to_string(attrs.size()) + " attributes");
    for (size_t i = attrs.size() - static_cast<size_t>(opts.num_labels); i < attrs.size(); ++i) attrs[i].is_label = true;
  } else {
    return Status::InvalidArgument(path + ": which attributes are the labels? Give MULAN's label XML file "
                                          "(data.label_xml, tether-data --label_xml) or the number of labels, "
                                          "the last attributes (data.num_labels, --num_labels)");
  }
  for (Attribute& a : attrs) {
    if (a.is_label) {
      const bool binary = a.nominal && a.values.size() == 2 &&
                          ((a.values[0] == "0" && a.values[1] == "1") || (a.values[0] == "1" && a.values[1] == "0"));
      if (!binary)
        return Status::InvalidArgument(At(path, a.line) + "label attribute " + Quote(a.name) +
                                       " must be nominal {0,1}");
      a.col = static_cast<uint32_t>(schema->num_labels++);
    } else {
      if (a.nominal) {
        for (const std::string& v : a.values) {
          float f = 0;
          if (ParseFloat(v.data(), v.data() + v.size(), &f) != NumKind::kOk)
            return Status::InvalidArgument(At(path, a.line) + "nominal attribute " + Quote(a.name) + " has the value " +
                                           Quote(v) + ", not a number: Tether reads nominal features only when "
                                           "their values are numbers, such as {0,1} (one-hot encode the others)");
          a.value_of.emplace(v, f);
        }
      }
      a.col = static_cast<uint32_t>(schema->num_features++);
    }
    if (schema->num_features > kMaxDim || schema->num_labels > kMaxDim)
      return Status::InvalidArgument(At(path, a.line) + "too many attributes for the 32-bit column limit");
  }
  if (opts.num_features > 0 && static_cast<uint64_t>(opts.num_features) != schema->num_features)
    return Status::InvalidArgument(path + ": the header declares " + std::to_string(schema->num_features) +
                                   " feature attributes but num_features is " + std::to_string(opts.num_features));
  return Status::OK();
}

// One data row, parsed.
class RowParser {
 public:
  RowParser(const std::string& path, const ReadOptions& opts, const Schema& schema)
      : path_(path), opts_(opts), schema_(schema) {}

  // Returns a non-OK status for a malformed line; sets *bad for a
  // well-formed line with a non-finite value.
  Status Parse(std::string_view t, int64_t line_no, std::string* bad) {
    line_no_ = line_no;
    bad->clear();
    feats_.clear();
    labels_.clear();
    const size_t n_attrs = schema_.attrs.size();
    if (t[0] == '{') {
      // Find the closing brace outside quotes.
      size_t close = std::string_view::npos;
      char quote = 0;
      for (size_t i = 1; i < t.size(); ++i) {
        if (quote != 0) {
          if (t[i] == '\\') ++i;
          else if (t[i] == quote) quote = 0;
        } else if (t[i] == '\'' || t[i] == '"') {
          quote = t[i];
        } else if (t[i] == '}') {
          close = i;
          break;
        }
      }
      if (close == std::string_view::npos)
        return Status::InvalidArgument(At(path_, line_no_) + "sparse row without its closing '}'");
      const std::string_view after = Trim(t.substr(close + 1));
      if (!after.empty()) {
        if (after[0] == ',' && Trim(after.substr(1)).substr(0, 1) == "{")
          return Status::InvalidArgument(At(path_, line_no_) + "instance weight " + Quote(after) +
                                         " after the row: weighted instances are not supported");
        return Status::InvalidArgument(At(path_, line_no_) + "unexpected text " + Quote(after) +
                                       " after the sparse row's closing '}'");
      }
      const std::string_view body = Trim(t.substr(1, close - 1));
      if (!body.empty()) {
        for (std::string_view entry : SplitOutsideQuotes(body, ',')) {
          entry = Trim(entry);
          size_t k = 0;
          while (k < entry.size() && !IsSpace(entry[k])) ++k;
          uint64_t idx = 0;
          const UintParse r = ParseUint(entry.data(), entry.data() + k, &idx);
          if (entry.empty() || r == UintParse::kInvalid)
            return Status::InvalidArgument(At(path_, line_no_) + "expected a sparse entry 'index value', got " +
                                           Quote(entry));
          if (r == UintParse::kTooLarge || idx >= n_attrs)
            return Status::InvalidArgument(At(path_, line_no_) + "attribute index " +
                                           std::string(entry.substr(0, k)) + " is out of range (entry " +
                                           Quote(entry) + "): the header declares " + std::to_string(n_attrs) +
                                           " attributes, indices 0.." + std::to_string(n_attrs - 1));
          const std::string_view value = Trim(entry.substr(k));
          if (value.empty())
            return Status::InvalidArgument(At(path_, line_no_) + "sparse entry " + Quote(entry) + " has no value");
          TETHER_RETURN_IF_ERROR(Value(schema_.attrs[idx], value, bad));
        }
      }
    } else {
      const std::vector<std::string_view> values = SplitOutsideQuotes(t, ',');
      if (values.size() != n_attrs)
        return Status::InvalidArgument(At(path_, line_no_) + "dense row has " + std::to_string(values.size()) +
                                       " values but the header declares " + std::to_string(n_attrs) + " attributes");
      for (size_t i = 0; i < n_attrs; ++i) TETHER_RETURN_IF_ERROR(Value(schema_.attrs[i], values[i], bad));
    }
    TETHER_RETURN_IF_ERROR(SortFeatures(bad));
    return SortLabels();
  }

  const std::vector<uint32_t>& feature_ids() const { return ids_; }
  const std::vector<float>& feature_values() const { return vals_; }
  const std::vector<uint32_t>& labels() const { return labels_; }

 private:
  Status Value(const Attribute& a, std::string_view tok, std::string* bad) {
    tok = Trim(tok);
    if (!Unquote(tok, &value_))
      return Status::InvalidArgument(At(path_, line_no_) + "malformed value " + Quote(tok) + " for attribute " +
                                     Quote(a.name));
    if (value_ == "?")
      return Status::InvalidArgument(At(path_, line_no_) + "missing value '?' for attribute " + Quote(a.name) +
                                     ": missing values are not supported");
    if (a.is_label) {
      if (value_ == "1") labels_.push_back(a.col);
      else if (value_ != "0")
        return Status::InvalidArgument(At(path_, line_no_) + "label " + Quote(a.name) + " has the value " +
                                       Quote(value_) + ": a label's value must be 0 or 1");
      return Status::OK();
    }
    float v = 0;
    if (a.nominal) {
      const auto it = a.value_of.find(value_);
      if (it == a.value_of.end()) {
        std::string list;
        for (const std::string& s : a.values) list += (list.empty() ? "" : ",") + s;
        return Status::InvalidArgument(At(path_, line_no_) + "value " + Quote(value_) + " is not one of attribute " +
                                       Quote(a.name) + "'s values {" + list + "}");
      }
      v = it->second;
    } else {
      const NumKind k = ParseFloat(value_.data(), value_.data() + value_.size(), &v);
      if (k == NumKind::kSyntax)
        return Status::InvalidArgument(At(path_, line_no_) + "invalid value " + Quote(value_) +
                                       " for numeric attribute " + Quote(a.name) + ": expected a number");
      if (k != NumKind::kOk) {
        if (bad->empty()) *bad = "attribute " + Quote(a.name) + " value " + Quote(value_) + " " + NumKindText(k);
        return Status::OK();
      }
    }
    if (v != 0) feats_.emplace_back(a.col, v);
    return Status::OK();
  }

  Status SortFeatures(std::string* bad) {
    std::stable_sort(feats_.begin(), feats_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    ids_.clear();
    vals_.clear();
    for (const auto& [col, v] : feats_) {
      if (!ids_.empty() && ids_.back() == col) {
        switch (opts_.duplicates) {
          case DuplicatePolicy::kError:
            return Status::InvalidArgument(At(path_, line_no_) + "feature attribute " +
                                           Quote(schema_.attrs[AttrOfFeature(col)].name) +
                                           " is given twice (to merge repeats, set data.duplicates: "
                                           "DUPLICATES_SUM or DUPLICATES_KEEP_LAST)");
          case DuplicatePolicy::kSum:
            vals_.back() += v;
            if (!std::isfinite(vals_.back()) && bad->empty())
              *bad = "a repeated attribute sums to a value that overflows float";
            break;
          case DuplicatePolicy::kKeepLast:
            vals_.back() = v;
            break;
        }
        continue;
      }
      ids_.push_back(col);
      vals_.push_back(v);
    }
    return Status::OK();
  }

  Status SortLabels() {
    std::sort(labels_.begin(), labels_.end());
    const auto dup = std::adjacent_find(labels_.begin(), labels_.end());
    if (dup == labels_.end()) return Status::OK();
    if (opts_.duplicates == DuplicatePolicy::kError)
      return Status::InvalidArgument(At(path_, line_no_) + "label " + Quote(LabelName(*dup)) + " is given twice");
    labels_.erase(std::unique(labels_.begin(), labels_.end()), labels_.end());
    return Status::OK();
  }

  size_t AttrOfFeature(uint32_t col) const {
    for (size_t i = 0; i < schema_.attrs.size(); ++i)
      if (!schema_.attrs[i].is_label && schema_.attrs[i].col == col) return i;
    return 0;
  }
  std::string LabelName(uint32_t col) const {
    for (const Attribute& a : schema_.attrs)
      if (a.is_label && a.col == col) return a.name;
    return "";
  }

  const std::string& path_;
  const ReadOptions& opts_;
  const Schema& schema_;
  int64_t line_no_ = 0;
  std::string value_;
  std::vector<std::pair<uint32_t, float>> feats_;
  std::vector<uint32_t> ids_;
  std::vector<float> vals_;
  std::vector<uint32_t> labels_;
};

Status CheckArffOptions(const std::string& path, const ReadOptions& opts) {
  if (opts.index_base != -1 && opts.index_base != 0)
    return Status::InvalidArgument(path + ": ARFF attribute indices are 0-based by definition; index_base must be "
                                          "0 or unset, got " + std::to_string(opts.index_base));
  if (opts.num_partitions < 1 || opts.partition < 0 || opts.partition >= opts.num_partitions)
    return Status::InvalidArgument(path + ": partition " + std::to_string(opts.partition) + " of " +
                                   std::to_string(opts.num_partitions) +
                                   " is invalid: need 0 <= partition < num_partitions");
  if (opts.num_features < 0 || opts.num_labels < 0)
    return Status::InvalidArgument(path + ": num_features and num_labels must be >= 0");
  if (opts.hashed_features)
    return Status::InvalidArgument(path + ": hashed_features applies to XMC and LIBSVM text; ARFF attributes are "
                                          "declared columns, not 64-bit ids");
  if (opts.row_subset != nullptr) {
    const std::vector<int64_t>& s = *opts.row_subset;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i] < 0 || (i > 0 && s[i] <= s[i - 1]))
        return Status::InvalidArgument(path + ": row_subset must hold strictly increasing non-negative row indices; "
                                              "entry " + std::to_string(i) + " is " + std::to_string(s[i]));
  }
  return Status::OK();
}

bool IsDataLine(std::string_view t) { return !t.empty() && t[0] != '%'; }

// Which data rows this partition takes: a range [lo, hi) of the data rows,
// or the partition's share of opts.row_subset (sorted).
class RowPick {
 public:
  // From the schema's source: with more partitions and no subset, counts
  // the data rows on a second source made by `reopen`.
  template <typename Reopen>
  static StatusOr<RowPick> Make(const ReadOptions& opts, const Schema& schema, Reopen reopen) {
    const auto cut = [&opts](uint64_t total, int p) {
      const uint64_t n = static_cast<uint64_t>(opts.num_partitions);
      const uint64_t up = static_cast<uint64_t>(p);
      return static_cast<int64_t>(total / n * up + total % n * up / n);
    };
    RowPick pick;
    if (opts.row_subset != nullptr) {
      const uint64_t k = opts.row_subset->size();
      pick.sub_next_ = opts.row_subset->data() + cut(k, opts.partition);
      pick.sub_end_ = opts.row_subset->data() + cut(k, opts.partition + 1);
    } else if (opts.num_partitions > 1) {
      TETHER_ASSIGN_OR_RETURN(std::unique_ptr<LineSource> counter, reopen());
      std::string_view line;
      while (counter->line_no() < schema.data_line && counter->Next(&line)) {
      }
      uint64_t rows = 0;
      while (counter->Next(&line)) rows += IsDataLine(Trim(line)) ? 1 : 0;
      TETHER_RETURN_IF_ERROR(counter->status());
      pick.lo_ = cut(rows, opts.partition);
      pick.hi_ = cut(rows, opts.partition + 1);
    }
    return pick;
  }

  // Whether data row `row` (0-based, called in increasing order) is taken.
  bool Take(int64_t row) {
    if (sub_next_ == nullptr) return row >= lo_ && row < hi_;
    const bool take = sub_next_ < sub_end_ && *sub_next_ == row;
    if (take) ++sub_next_;
    return take;
  }

 private:
  int64_t lo_ = 0, hi_ = std::numeric_limits<int64_t>::max();
  const int64_t* sub_next_ = nullptr;
  const int64_t* sub_end_ = nullptr;
};

// The checks and log lines after the last row: `data_rows` data rows in the
// file, `ds` what this partition kept.
Status FinishArff(const std::string& path, const ReadOptions& opts, const Schema& schema, int64_t data_rows,
                  const Dataset& ds) {
  if (data_rows == 0) return Status::InvalidArgument(path + ": no examples found (no rows after @data on line " +
                                                     std::to_string(schema.data_line) + ")");
  if (opts.row_subset != nullptr && !opts.row_subset->empty() && opts.row_subset->back() >= data_rows)
    return RowSubsetPastEnd(path, opts, data_rows);
  if (ds.unlabeled_rows > 0)
    LOG(INFO) << path << ": " << ds.unlabeled_rows << " rows have no labels"
              << (opts.skip_unlabeled ? " (skipped)" : " (kept as all-negative)");
  LOG(INFO) << path << ": ARFF, partition " << opts.partition << "/" << opts.num_partitions
            << (opts.row_subset ? " of a row subset" : "") << ": read " << ds.rows_read << " of " << data_rows
            << " rows, kept " << ds.features.rows << ", dropped " << ds.dropped_rows << "; " << ds.features.cols
            << " features, " << ds.labels.cols << " labels, nnz " << ds.features.nnz();
  if (ds.features.rows == 0) {
    if (opts.num_partitions == 1)
      return Status::InvalidArgument(path + ": no examples found after filtering: " + std::to_string(ds.rows_read) +
                                     " rows read, " + std::to_string(ds.dropped_rows) + " dropped as non-finite, " +
                                     std::to_string(opts.skip_unlabeled ? ds.unlabeled_rows : 0) +
                                     " skipped as unlabeled");
    LOG(WARNING) << path << ": partition " << opts.partition << "/" << opts.num_partitions << " holds no rows";
  }
  return Status::OK();
}

// The whole read, from a line source that `reopen` can make again (for the
// row count of byte-less partitioning).
template <typename Reopen>
StatusOr<Dataset> ReadArff(const std::string& path, const ReadOptions& opts, Reopen reopen) {
  TETHER_RETURN_IF_ERROR(CheckArffOptions(path, opts));
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<LineSource> src, reopen());
  Schema schema;
  TETHER_RETURN_IF_ERROR(ReadSchema(path, src.get(), opts, &schema));
  TETHER_ASSIGN_OR_RETURN(RowPick pick, RowPick::Make(opts, schema, reopen));

  Dataset ds;
  ds.features.cols = static_cast<int64_t>(schema.num_features);
  ds.labels.cols = static_cast<int64_t>(schema.num_labels);
  for (const Attribute& a : schema.attrs) (a.is_label ? ds.label_names : ds.feature_names).push_back(a.name);
  RowParser parser(path, opts, schema);
  std::vector<float> ones;
  std::string bad;
  int64_t row = -1;
  std::string_view line;
  while (src->Next(&line)) {
    const std::string_view t = Trim(line);
    if (!IsDataLine(t)) continue;
    if (!pick.Take(++row)) continue;
    const int64_t ln = src->line_no();
    TETHER_RETURN_IF_ERROR(parser.Parse(t, ln, &bad));
    ++ds.rows_read;
    if (!bad.empty()) {
      if (opts.non_finite == NonFinitePolicy::kError)
        return Status::InvalidArgument(At(path, ln) + "non-finite value: " + bad +
                                       "; to drop such rows instead, set data.non_finite: NON_FINITE_DROP_ROW "
                                       "(tether-data: --non_finite=drop_row)");
      LOG(WARNING) << At(path, ln) << "dropping row: " << bad;
      ++ds.dropped_rows;
      continue;
    }
    if (parser.labels().empty()) {
      ++ds.unlabeled_rows;
      if (opts.skip_unlabeled) continue;
    }
    const auto& ids = parser.feature_ids();
    ds.features.AppendRow(ids.data(), parser.feature_values().data(), ids.size());
    const auto& labels = parser.labels();
    if (labels.size() > ones.size()) ones.resize(labels.size(), 1.0f);
    ds.labels.AppendRow(labels.data(), ones.data(), labels.size());
    ds.source_lines.push_back(ln);
  }
  TETHER_RETURN_IF_ERROR(src->status());
  TETHER_RETURN_IF_ERROR(FinishArff(path, opts, schema, row + 1, ds));
  return ds;
}

}  // namespace

StatusOr<std::vector<std::string>> ReadMulanLabelXml(const std::string& path) {
  TETHER_ASSIGN_OR_RETURN(std::vector<XmlLabel> labels, ParseLabelXml(path));
  std::vector<std::string> out;
  out.reserve(labels.size());
  for (XmlLabel& l : labels) out.push_back(std::move(l.name));
  return out;
}

StatusOr<ArffHeader> ReadArffHeader(const std::string& path, const ReadOptions& opts) {
  TETHER_RETURN_IF_ERROR(CheckArffOptions(path, opts));
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<FileLines> src,
                          FileLines::Open(path, ResolveReadBudget(opts.memory_budget)));
  Schema schema;
  TETHER_RETURN_IF_ERROR(ReadSchema(path, src.get(), opts, &schema));
  ArffHeader h;
  h.relation = schema.relation;
  for (const Attribute& a : schema.attrs) (a.is_label ? h.label_names : h.feature_names).push_back(a.name);
  return h;
}

StatusOr<Dataset> ReadArffDataset(const std::string& path, const ReadOptions& opts) {
  const MemoryBudget budget = ResolveReadBudget(opts.memory_budget);
  return ReadArff(path, opts, [&path, &budget]() -> StatusOr<std::unique_ptr<LineSource>> {
    TETHER_ASSIGN_OR_RETURN(std::unique_ptr<FileLines> f, FileLines::Open(path, budget));
    return std::unique_ptr<LineSource>(std::move(f));
  });
}

StatusOr<Dataset> ParseArffDataset(const std::string& bytes, const std::string& name, const ReadOptions& opts) {
  std::string storage;
  TETHER_ASSIGN_OR_RETURN(std::string_view content, DecodeInput(name, bytes, &storage, opts.memory_budget));
  TETHER_RETURN_IF_ERROR(text::CheckIsText(name, content));
  return ReadArff(name, opts, [content]() -> StatusOr<std::unique_ptr<LineSource>> {
    return std::unique_ptr<LineSource>(new MemoryLines(content));
  });
}

}  // namespace tether
