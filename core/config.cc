#include "core/config.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>

#include "core/memory_fit.h"
#include "core/data_files.h"
#include "core/wire_limits.h"

namespace tether {
namespace {

// cluster.max_workers' ceiling: servers keep a slot per rank that joined.
constexpr int kMaxWorkerRanks = 1 << 16;

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Collects the parser's first error with its 1-based line.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber /*column*/,
                const std::string& message) override {
    if (line_ < 0) {
      line_ = line + 1;  // the parser counts lines from 0
      message_ = message;
    }
  }
  int line() const { return line_; }
  const std::string& message() const { return message_; }

 private:
  int line_ = -1;
  std::string message_;
};

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
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot open config file");
  std::stringstream ss;
  ss << in.rdbuf();
  TETHER_ASSIGN_OR_RETURN(JobConfig config, ParseJobConfig(ss.str(), path));
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
  for (const char* name : {"train_file", "test_file", "train_split", "test_split", "train_label_file",
                           "test_label_file", "label_xml"}) {
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

const std::vector<ConfigOverride>& ConfigOverrides() {
  static const std::vector<ConfigOverride> kOverrides = {
      {"staleness", "consistency.staleness", "staleness bound s in clocks: 0 = BSP, N = SSP, inf = ASP"},
      {"num_servers", "cluster.num_servers", "number of server shards"},
      {"num_workers", "cluster.num_workers", "number of workers"},
      {"max_workers", "cluster.max_workers", "bound on worker ranks: ranks in [num_workers, max_workers) may join a running job (0: num_workers)"},
      {"epochs", "train.epochs", "passes over each worker's training rows"},
      {"minibatch_size", "train.minibatch_size", "rows per minibatch"},
      {"minibatches_per_clock", "train.minibatches_per_clock", "minibatches between clock ticks"},
      {"seed", "train.seed", "random seed (init, shuffling)"},
      {"threads", "train.threads", "compute threads per worker"},
      {"device", "train.device", "compute backend: auto | cpu | cuda"},
      {"learning_rate", "optimizer.learning_rate", "server-side optimizer step size"},
      {"optimizer", "optimizer.type", "server-side optimizer: sgd | adagrad | adam | ftrl (sum | noop: tests, benchmarks)"},
      {"hidden", "model.hidden", "hidden-layer width"},
      {"loss", "model.loss", "softmax | bce"},
      {"normalize_rows", "data.normalize_rows", "scale each row's features to unit L2 norm: true | false"},
      {"l2", "optimizer.l2", "L2 regularisation added to every gradient"},
      {"index_base", "data.index_base", "index base of the data files: 0 or 1"},
      {"train_file", "data.train_file", "training data: a file, or a comma-separated list of files and glob patterns"},
      {"test_file", "data.test_file", "test data: a file, or a comma-separated list of files and glob patterns"},
      {"request_timeout_ms", "cluster.request_timeout_ms", "timeout for a reply from a server"},
      {"slowdown", "train.slowdown", "straggler: worker --slowdown_rank runs this many times slower"},
      {"slowdown_rank", "train.slowdown_rank", "the worker slowed by --slowdown"},
      {"adaptive_batch", "train.adaptive_batch.enabled", "adaptive minibatch sizes per worker from measured throughput: true | false (docs/CONSISTENCY.md)"},
      {"adaptive_batch_min", "train.adaptive_batch.b_min", "adaptive batch: smallest minibatch size (0: minibatch_size / 4)"},
      {"adaptive_batch_max", "train.adaptive_batch.b_max", "adaptive batch: largest minibatch size (0: 4 x minibatch_size)"},
      {"adaptive_batch_step", "train.adaptive_batch.step_scaling", "adaptive batch: how a push's step follows its size: linear | server_weight | unscaled"},
      {"data_on_demand", "train.data_on_demand", "shard 0 deals the training rows in chunks as workers ask (faster workers train more rows): true | false"},
      {"chunk_rows", "train.chunk_rows", "rows per chunk with --data_on_demand (0: 4 x minibatch_size)"},
      {"chunk_bytes", "train.chunk_bytes", "bytes per chunk with --data_on_demand and data.streaming (0: chunk_rows x the mean bytes per row of the first training file; a gzip file is one chunk)"},
      {"chunk_taper", "train.chunk_taper", "with --data_on_demand, smaller chunks toward each epoch's end so no worker waits long for a slow one's last chunk: true | false"},
      {"pipeline", "train.pipeline", "overlap the next minibatch's input-row pull and the output layer's push with compute (exact; docs/RUNNING.md): true | false"},
      {"staleness_policy", "consistency.staleness_policy", "step scaling for stale pushes: none | inverse | inverse_plus_one"},
      {"consistency_model", "consistency.model", "consistency model: ssp | bsp | asp | average (weighted model averaging)"},
      {"period_rows", "consistency.period_rows", "model AVERAGE: rows a worker trains its replica on per round"},
      {"model_momentum", "consistency.model_momentum", "model AVERAGE: momentum m of the merge, in [0, 1)"},
      {"worker_timeout_ms", "cluster.worker_timeout_ms", "a worker silent this long is removed (or fails the job)"},
      {"liveness_timeout_ms", "cluster.liveness_timeout_ms", "a worker gives up a server whose connection is down this long (0: off)"},
      {"startup_timeout_ms", "cluster.startup_timeout_ms", "servers: every worker joins within this of the first HELLO; workers: the servers are found and reached within this"},
      {"server_secret_key_file", "security.curve.server_secret_key_file", "CURVE: the servers' key pair (NAME.key from tether-keygen); servers"},
      {"server_public_key_file", "security.curve.server_public_key_file", "CURVE: the servers' public key (NAME.pub); workers"},
      {"client_secret_key_file", "security.curve.client_secret_key_file", "CURVE: this worker's key pair (NAME.key); workers"},
      {"client_public_key_file", "security.curve.client_public_key_file", "CURVE: this worker's public key, checked against its key pair (optional); workers"},
      {"authorized_keys", "security.curve.authorized_keys", "CURVE: comma-separated worker .pub files or directories of them; servers"},
      {"eval_every_epochs", "train.eval_every_epochs", "every worker evaluates its part of the test set every N epochs during training, rank 0 reports (0: at the end only)"},
      {"metrics_dir", "train.metrics_dir", "every process appends JSON-lines metrics to DIR/<role>-<rank>.jsonl"},
      {"progress_every_s", "train.progress_every_s", "seconds between progress lines (0: none)"},
      {"eval_max_rows", "train.eval_max_rows", "evaluate on the first N test rows only (0: all)"},
      {"fail_on_divergence", "train.fail_on_divergence", "exit 3 when the training loss diverges: true | false"},
      {"divergence_factor", "train.divergence_factor", "loss above this many times its reference is divergence"},
      {"psp_a", "train.psp_a", "propensity constant A of PSP@k in the test metrics (default 0.55)"},
      {"psp_b", "train.psp_b", "propensity constant B of PSP@k in the test metrics (default 1.5)"},
      {"sampled_labels", "model.sampled_labels", "sampled softmax over K output rows per minibatch (0: full softmax)"},
      {"eval_minibatch_size", "train.eval_minibatch_size", "rows per evaluation minibatch"},
      {"job_id", "cluster.job_id", "the job's identity at HELLO (default: the config's name); servers and workers must agree"},
      {"generation", "cluster.generation", "the job's generation at HELLO; a restart or requeue increments it"},
      {"rendezvous", "cluster.rendezvous", "where servers publish endpoints and workers find them: file:DIR, DIR or tcp://HOST:PORT (docs/DEPLOY.md)"},
      {"checkpoint_dir", "checkpoint.dir", "write coordinated checkpoints under DIR (see docs/OPERATIONS.md)"},
      {"checkpoint_every_clocks", "checkpoint.every_clocks", "a checkpoint every N clocks (0: not by clocks)"},
      {"checkpoint_every_seconds", "checkpoint.every_seconds", "a checkpoint every N seconds (0: not by time)"},
      {"checkpoint_keep_last", "checkpoint.keep_last", "complete checkpoints kept (older ones are deleted)"},
      {"cache_capacity", "consistency.cache_capacity_bytes", "worker parameter cache capacity over all tables: 64MiB, 1.5GB, bytes, or 10% of the model (0: unbounded)"},
      {"key_list_cache", "consistency.key_list_cache", "workers name repeated key lists instead of sending the keys (core/net/key_list_cache.h): true | false"},
      {"memory_limit", "consistency.memory_limit_bytes", "memory this process may count on for the job's tables or cache, checked at start-up: 8GiB, ... (0: MemAvailable)"},
  };
  return kOverrides;
}

namespace {

// What a flag value of each field type must look like, for messages.
std::string ExpectedValue(const FieldDescriptor* field) {
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: return "a 32-bit integer";
    case FieldDescriptor::CPPTYPE_INT64: return "an integer";
    case FieldDescriptor::CPPTYPE_UINT32: return "a non-negative 32-bit integer";
    case FieldDescriptor::CPPTYPE_UINT64: return "a non-negative integer";
    case FieldDescriptor::CPPTYPE_FLOAT:
    case FieldDescriptor::CPPTYPE_DOUBLE: return "a number";
    case FieldDescriptor::CPPTYPE_BOOL: return "true or false";
    default: return std::string("a ") + field->cpp_type_name();
  }
}

}  // namespace

Status ApplyOverride(JobConfig* config, const std::string& field_path, const std::string& value,
                     const std::string& source) {
  Message* msg = config;
  std::string rest = field_path;
  const FieldDescriptor* field = nullptr;
  while (true) {
    const size_t dot = rest.find('.');
    field = msg->GetDescriptor()->FindFieldByName(rest.substr(0, dot));
    if (field == nullptr) return Status::Internal("no config field " + field_path);
    if (dot == std::string::npos) break;
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || field->is_repeated())
      return Status::Internal("config field " + field_path + " is not a path of singular messages");
    msg = msg->GetReflection()->MutableMessage(msg, field);
    rest = rest.substr(dot + 1);
  }
  if (field->is_repeated() && field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
    // A list of strings (security.curve.authorized_keys): comma-separated,
    // replacing the config's list.
    msg->GetReflection()->ClearField(msg, field);
    size_t begin = 0;
    while (begin <= value.size()) {
      const size_t comma = std::min(value.find(',', begin), value.size());
      if (comma > begin) msg->GetReflection()->AddString(msg, field, value.substr(begin, comma - begin));
      begin = comma + 1;
    }
    return Status::OK();
  }
  if (field->is_repeated() || field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE)
    return Status::Internal("config field " + field_path + " is not a scalar");
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(source + "=" + value + ": " + why + " (field " + field_path + ")");
  };
  std::string text = value;
  if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
    // Protobuf's text format wants a quoted string; a flag value is the
    // string itself (a path, a device name), taken as it is.
    msg->GetReflection()->SetString(msg, field, value);
    return Status::OK();
  }
  if (field->cpp_type() == FieldDescriptor::CPPTYPE_ENUM) {
    // Enum names are upper case in the schema; flags accept any case.
    std::transform(text.begin(), text.end(), text.begin(), ::toupper);
    if (field->enum_type()->FindValueByName(text) == nullptr) {
      std::string names;
      for (int i = 0; i < field->enum_type()->value_count(); ++i) {
        std::string n = field->enum_type()->value(i)->name();
        std::transform(n.begin(), n.end(), n.begin(), ::tolower);
        names += (i ? ", " : "") + n;
      }
      return bad("expected one of " + names);
    }
  }
  if (field_path == "consistency.cache_capacity_bytes" || field_path == "consistency.memory_limit_bytes") {
    // Byte sizes with units; the cache capacity also as a percentage of
    // the model (cache_capacity_fraction). The two capacity fields exclude
    // each other: setting one clears the other.
    ConsistencyConfig* c = config->mutable_consistency();
    const bool cache = field_path == "consistency.cache_capacity_bytes";
    if (cache && !value.empty() && value.back() == '%') {
      double percent = 0;
      std::istringstream in(value.substr(0, value.size() - 1));
      in >> percent;
      if (in.fail() || !in.eof() || !(percent > 0) || !(percent <= 100))
        return bad("expected a percentage in (0, 100] of the model");
      c->clear_cache_capacity_bytes();
      c->set_cache_capacity_fraction(percent / 100);
      return Status::OK();
    }
    StatusOr<uint64_t> bytes = ParseByteSize(value);
    if (!bytes.ok()) return bad(bytes.status().message() + (cache ? ", or a percentage such as 10%" : ""));
    if (cache) {
      c->clear_cache_capacity_fraction();
      c->set_cache_capacity_bytes(*bytes);
    } else {
      c->set_memory_limit_bytes(*bytes);
    }
    return Status::OK();
  }
  const bool staleness = field_path == "consistency.staleness";
  if (staleness) {
    std::string lower = value;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (lower == "inf" || lower == "asp" || lower == "infinity") text = "-1";
    if (lower == "bsp") text = "0";
  }
  // A message of its own so that a bad value leaves the config untouched.
  std::unique_ptr<Message> scratch(msg->New());
  google::protobuf::TextFormat::Parser parser;
  FirstErrorCollector errors;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFieldValueFromString(text, field, scratch.get()))
    return bad("expected " + ExpectedValue(field) + (staleness ? ", inf or asp" : ""));
  msg->GetReflection()->SwapFields(msg, scratch.get(), {field});
  if (field_path == "consistency.model" && config->consistency().model() == AVERAGE) {
    // --consistency_model=average: rounds replace the config's bound (a
    // staleness or per-table model would be refused under AVERAGE).
    config->mutable_consistency()->clear_staleness();
    for (auto& t : *config->mutable_table()) {
      t.mutable_consistency()->clear_model();
      t.mutable_consistency()->clear_staleness();
    }
  }
  if (field_path == "consistency.model" && config->consistency().model() != AVERAGE) {
    // Leaving AVERAGE by flag: its own fields go with it.
    config->mutable_consistency()->clear_period_rows();
    config->mutable_consistency()->clear_model_momentum();
  }
  if (staleness) {
    // One bound for the whole run: the model follows the number and
    // per-table bounds give way to it.
    config->mutable_consistency()->set_model(config->consistency().staleness() == -1 ? ASP : SSP);
    for (auto& t : *config->mutable_table()) {
      t.mutable_consistency()->clear_model();
      t.mutable_consistency()->clear_staleness();
    }
  }
  return Status::OK();
}

Status CheckOverridesApply(const JobConfig& config, const std::vector<std::pair<std::string, std::string>>& set) {
  struct Needs {
    const char* flag;
    const char* setting;  // what the flag needs, as a user reads it
    const char* enable;   // the flag that turns it on
    bool (*holds)(const JobConfig&);
  };
  static const Needs kNeeds[] = {
      {"chunk_rows", "train.data_on_demand true", "--data_on_demand=true",
       [](const JobConfig& c) { return c.train().data_on_demand(); }},
      {"adaptive_batch_min", "train.adaptive_batch.enabled true", "--adaptive_batch=true",
       [](const JobConfig& c) { return c.train().adaptive_batch().enabled(); }},
      {"adaptive_batch_max", "train.adaptive_batch.enabled true", "--adaptive_batch=true",
       [](const JobConfig& c) { return c.train().adaptive_batch().enabled(); }},
      {"adaptive_batch_step", "train.adaptive_batch.enabled true", "--adaptive_batch=true",
       [](const JobConfig& c) { return c.train().adaptive_batch().enabled(); }},
      {"period_rows", "consistency.model AVERAGE", "--consistency_model=average",
       [](const JobConfig& c) { return c.consistency().model() == AVERAGE; }},
      {"model_momentum", "consistency.model AVERAGE", "--consistency_model=average",
       [](const JobConfig& c) { return c.consistency().model() == AVERAGE; }},
      {"slowdown_rank", "train.slowdown > 1", "--slowdown=F",
       [](const JobConfig& c) { return c.train().slowdown() > 1.0f; }},
      {"chunk_taper", "train.data_on_demand true", "--data_on_demand=true",
       [](const JobConfig& c) { return c.train().data_on_demand(); }},
      {"chunk_bytes", "train.data_on_demand true and data.streaming true",
       "--data_on_demand=true (with data.streaming: true in the config)",
       [](const JobConfig& c) { return c.train().data_on_demand() && c.data().streaming(); }},
      // AVERAGE's round (period_rows) is its clock.
      {"minibatches_per_clock", "consistency.model SSP, BSP or ASP (AVERAGE clocks once per round of period_rows)",
       "--consistency_model=ssp", [](const JobConfig& c) { return c.consistency().model() != AVERAGE; }},
  };
  for (const auto& [flag, value] : set)
    for (const Needs& n : kNeeds)
      if (flag == n.flag && !n.holds(config))
        return Status::InvalidArgument("flag --" + flag + "=" + value + " is only read with " + n.setting +
                                       ", which this job does not set: add " + n.enable + ", or drop --" + flag);
  return Status::OK();
}

namespace {

// Consistency model AVERAGE (server/model_average.h): job-wide, rounds
// closed like BSP, and an optimizer whose step a local replica can take.
Status ValidateAverage(const JobConfig& c) {
  auto bad = [](const std::string& field, const std::string& why) {
    return Status::InvalidArgument("config field " + field + ": " + why);
  };
  const ConsistencyConfig& j = c.consistency();
  const bool average = j.model() == AVERAGE;
  for (const auto& t : c.table()) {
    const ConsistencyConfig& tc = t.consistency();
    const std::string where = "table[" + t.name() + "].consistency.";
    if (tc.has_model() && tc.model() == AVERAGE)
      return bad(where + "model", "AVERAGE is job-wide (one merge round for every table): set it in the job's "
                                  "consistency section");
    if (tc.has_period_rows() || tc.has_model_momentum())
      return bad(where + (tc.has_period_rows() ? "period_rows" : "model_momentum"),
                 "is job-wide: set it in the job's consistency section");
    if (average && (tc.has_model() || tc.has_staleness()))
      return bad(where + (tc.has_model() ? "model" : "staleness"),
                 "consistency.model is AVERAGE: every table merges on the job's rounds, so a table may not name "
                 "its own model or staleness");
    if (average && t.has_optimizer() &&
        (t.optimizer().type() == FTRL || t.optimizer().type() == SUM || t.optimizer().type() == NOOP))
      return bad("table[" + t.name() + "].optimizer.type",
                 OptimizerType_Name(t.optimizer().type()) +
                     " cannot train a local replica under consistency.model AVERAGE (use SGD, ADAGRAD or ADAM)");
  }
  if (!average) {
    if (j.has_period_rows()) return bad("consistency.period_rows", "is only read with consistency.model AVERAGE");
    if (j.has_model_momentum())
      return bad("consistency.model_momentum", "is only read with consistency.model AVERAGE");
    return Status::OK();
  }
  if (j.period_rows() < 1)
    return bad("consistency.period_rows", "must be ≥ 1 with consistency.model AVERAGE (rows a worker trains its "
                                          "replica on before it pushes its delta), got " +
                                              std::to_string(j.period_rows()));
  if (!(j.model_momentum() >= 0 && j.model_momentum() < 1))
    return bad("consistency.model_momentum", "must be in [0, 1), got " + std::to_string(j.model_momentum()));
  if (j.staleness() != 0)
    return bad("consistency.staleness", "must be 0 (or unset) with consistency.model AVERAGE: a round's pulls "
                                        "wait for the previous round's merge (got " +
                                            std::to_string(j.staleness()) + ")");
  if (j.staleness_policy() != NONE)
    return bad("consistency.staleness_policy", "does not apply with consistency.model AVERAGE (deltas are merged "
                                               "by round, not stepped by staleness)");
  const OptimizerType o = c.optimizer().type();
  if (o == FTRL || o == SUM || o == NOOP)
    return bad("optimizer.type", OptimizerType_Name(o) +
                                     " cannot train a local replica under consistency.model AVERAGE (use SGD, "
                                     "ADAGRAD or ADAM)");
  return Status::OK();
}

}  // namespace

Status ValidateServerConfig(const JobConfig& c) {
  auto bad = [](const std::string& field, const std::string& why) {
    return Status::InvalidArgument("config field " + field + ": " + why);
  };
  if (c.cluster().num_servers() < 1) return bad("cluster.num_servers", "must be ≥ 1");
  if (c.cluster().num_workers() < 1) return bad("cluster.num_workers", "must be ≥ 1");
  if (c.cluster().max_workers() < 0 ||
      (c.cluster().max_workers() > 0 && c.cluster().max_workers() < c.cluster().num_workers()))
    return bad("cluster.max_workers", "is " + std::to_string(c.cluster().max_workers()) +
                                          ": must be ≥ cluster.num_workers = " +
                                          std::to_string(c.cluster().num_workers()) + " (or 0: num_workers)");
  if (c.cluster().max_workers() > kMaxWorkerRanks)
    return bad("cluster.max_workers", "is " + std::to_string(c.cluster().max_workers()) + ", above the limit " +
                                          std::to_string(kMaxWorkerRanks));
  if (c.cluster().server_addresses_size() != 0 &&
      c.cluster().server_addresses_size() != c.cluster().num_servers())
    return bad("cluster.server_addresses", "has " + std::to_string(c.cluster().server_addresses_size()) +
                                               " entries but cluster.num_servers is " +
                                               std::to_string(c.cluster().num_servers()));
  if (c.consistency().staleness() < -1) return bad("consistency.staleness", "must be ≥ 0, or -1 (inf) for ASP");
  TETHER_RETURN_IF_ERROR(ValidateAverage(c));
  for (const auto& t : c.table()) {
    if (t.consistency().staleness() < -1)
      return bad("table[" + t.name() + "].consistency.staleness", "must be ≥ 0, or -1 (inf) for ASP");
    for (const char* field :
         {"cache_capacity_bytes", "cache_capacity_fraction", "memory_limit_bytes", "key_list_cache"}) {
      const google::protobuf::FieldDescriptor* f = ConsistencyConfig::descriptor()->FindFieldByName(field);
      if (t.consistency().GetReflection()->HasField(t.consistency(), f))
        return bad("table[" + t.name() + "].consistency." + field,
                   "is job-wide (one cache and one process for all tables): set it in the job's consistency "
                   "section");
    }
  }
  const double fraction = c.consistency().cache_capacity_fraction();
  if (!(fraction >= 0 && fraction <= 1))
    return bad("consistency.cache_capacity_fraction", "must be in (0, 1], or 0 (not set)");
  if (fraction > 0 && c.consistency().cache_capacity_bytes() > 0)
    return bad("consistency.cache_capacity_fraction",
               "and consistency.cache_capacity_bytes are both set: give one (the flag --cache_capacity sets "
               "either and clears the other)");
  if (c.cluster().heartbeat_interval_ms() < 1) return bad("cluster.heartbeat_interval_ms", "must be ≥ 1");
  if (c.cluster().worker_timeout_ms() <= c.cluster().heartbeat_interval_ms())
    return bad("cluster.worker_timeout_ms", "must exceed cluster.heartbeat_interval_ms (" +
                                                std::to_string(c.cluster().heartbeat_interval_ms()) + ")");
  // Below ~100 ms a reconnect after a transient drop (ZeroMQ retries every
  // 100 ms) could not come back in time.
  if (c.cluster().liveness_timeout_ms() != 0 && c.cluster().liveness_timeout_ms() < 100)
    return bad("cluster.liveness_timeout_ms", "must be ≥ 100, or 0 (off)");
  return Status::OK();
}

Status ValidateJobConfig(const JobConfig& c) {
  auto bad = [](const std::string& field, const std::string& why) {
    return Status::InvalidArgument("config field " + field + ": " + why);
  };
  // The sections a server reads come first, as a server checks them alone.
  TETHER_RETURN_IF_ERROR(ValidateServerConfig(c));
  if (c.data().format() == ARFF) {
    if (c.data().index_base() != -1 && c.data().index_base() != 0)
      return bad("data.index_base", "must be unset or 0 with data.format ARFF (ARFF attribute indices are 0-based)");
    if (c.data().label_xml().empty() && c.data().num_labels() <= 0)
      return bad("data.label_xml", "is required with data.format ARFF unless data.num_labels is set (then the last "
                                   "num_labels attributes are the labels)");
  } else if (c.data().index_base() != 0 && c.data().index_base() != 1) {
    return bad("data.index_base", "must be set to 0 or 1 (it is never guessed from the data)");
  }
  if (!c.data().label_xml().empty() && c.data().format() != ARFF)
    return bad("data.label_xml", "applies to data.format ARFF only");
  if (c.data().train_file().empty()) return bad("data.train_file", "is required");
  // Many files and streaming (core/data_files.h, input/row_stream.h).
  if (c.data().shuffle_buffer_rows() < 1) return bad("data.shuffle_buffer_rows", "must be ≥ 1");
  for (const auto& [field, value] : {std::pair<const char*, const std::string*>{"data.train_file", &c.data().train_file()},
                                     {"data.test_file", &c.data().test_file()}}) {
    if (!IsFileList(*value) && !(c.data().streaming() && field == std::string("data.train_file"))) continue;
    const std::string why = IsFileList(*value) ? "names several files" : "is streamed (data.streaming)";
    if (c.data().format() != XMC && c.data().format() != LIBSVM)
      return bad(field, why + ", which XMC and LIBSVM files support, not data.format " +
                            FileFormat_Name(c.data().format()));
    const std::string& split = field == std::string("data.train_file") ? c.data().train_split() : c.data().test_split();
    if (!split.empty())
      return bad(field, why + ", so its rows have no single numbering for a split file (" + field +
                            " with " + (field == std::string("data.train_file") ? "data.train_split" : "data.test_split") +
                            "): list the split's rows as files instead");
  }
  if (c.data().streaming() && !c.checkpoint().dir().empty())
    return bad("checkpoint.dir", "is set but data.streaming is true: a streamed epoch has no row list to record "
                                 "(and with train.data_on_demand the dealing state numbers rows in memory), so a "
                                 "checkpoint could not be resumed; train in memory (data.streaming: false) to "
                                 "checkpoint");
  if (IsFileList(c.data().train_file()) && !c.checkpoint().dir().empty())
    return bad("checkpoint.dir", "is set but data.train_file names several files, whose rows a checkpoint cannot "
                                 "number yet; concatenate them into one file to checkpoint");
  if (c.checkpoint().every_clocks() < 0) return bad("checkpoint.every_clocks", "must be ≥ 0 (0: not by clocks)");
  if (c.checkpoint().every_seconds() < 0) return bad("checkpoint.every_seconds", "must be ≥ 0 (0: not by time)");
  if (c.checkpoint().keep_last() < 1) return bad("checkpoint.keep_last", "must be ≥ 1");
  if (c.checkpoint().dir().empty() && (c.checkpoint().every_clocks() > 0 || c.checkpoint().every_seconds() > 0))
    return bad("checkpoint.dir", "is empty, so checkpoint.every_clocks / every_seconds would write nothing: set "
                                 "checkpoint.dir (--checkpoint_dir)");
  if (c.data().hashed_features()) {
    // Refused, not ignored: a declared width would promise a bound that no
    // id is checked against.
    if (c.data().format() == IDX || c.data().format() == ARFF)
      return bad("data.hashed_features",
                 std::string("applies to XMC and LIBSVM text; data.format ") +
                     (c.data().format() == IDX ? "IDX is dense pixels" : "ARFF declares its columns") +
                     ", not 64-bit feature ids");
    if (c.data().num_features() != 0)
      return bad("data.num_features", "must be 0 (unset) with data.hashed_features: true: feature ids are any "
                                      "64-bit integer and the model has no input width; got " +
                                          std::to_string(c.data().num_features()));
  } else if (c.data().num_features() <= 0) {
    return bad("data.num_features", "must be > 0 (the model's input width)");
  }
  // What the labels and widths must look like depends on the model: the
  // model registry checks those (ValidateModelConfig, worker/models/model_registry.h).
  if (c.data().format() == IDX) {
    if (c.data().train_label_file().empty()) return bad("data.train_label_file", "is required with data.format IDX");
    if (!c.data().test_file().empty() && c.data().test_label_file().empty())
      return bad("data.test_label_file", "is required with data.format IDX when data.test_file is set");
  }
  if (!(c.data().feature_scale() > 0) || !std::isfinite(c.data().feature_scale()))
    return bad("data.feature_scale", "must be a finite number > 0");
  if (!std::isfinite(c.data().feature_offset()))
    return bad("data.feature_offset", "must be a finite number");
  if (c.data().feature_offset() != 0 && c.model().type() != DENSE_MLP && c.model().name().empty())
    return bad("data.feature_offset", "applies to dense input only (model.type DENSE_MLP); a sparse model "
                                      "would lose its sparsity");
  if (c.model().hidden() < 1) return bad("model.hidden", "must be ≥ 1");
  if (!(c.model().init_scale() >= 0) || !std::isfinite(c.model().init_scale()))
    return bad("model.init_scale", "must be a finite number ≥ 0");
  if (c.train().epochs() < 1) return bad("train.epochs", "must be ≥ 1");
  if (c.train().minibatch_size() < 1) return bad("train.minibatch_size", "must be ≥ 1");
  if (c.train().minibatches_per_clock() < 1) return bad("train.minibatches_per_clock", "must be ≥ 1");
  if (c.train().threads() < 1) return bad("train.threads", "must be ≥ 1");
  if (!(c.train().slowdown() >= 1.0f) || !std::isfinite(c.train().slowdown()))
    return bad("train.slowdown", "must be a finite factor ≥ 1");
  if (c.train().slowdown() > 1.0f &&
      (c.train().slowdown_rank() < 0 || c.train().slowdown_rank() >= c.cluster().num_workers()))
    return bad("train.slowdown_rank", "must name a worker in [0, cluster.num_workers = " +
                                          std::to_string(c.cluster().num_workers()) + ")");
  {
    const AdaptiveBatchConfig& ab = c.train().adaptive_batch();
    const AdaptiveBatchConfig r = ResolvedAdaptiveBatch(c.train());
    const std::string mb = "train.minibatch_size (" + std::to_string(c.train().minibatch_size()) + ")";
    if (ab.b_min() < 0) return bad("train.adaptive_batch.b_min", "must be ≥ 1, or 0 (minibatch_size / 4)");
    if (ab.b_max() < 0) return bad("train.adaptive_batch.b_max", "must be ≥ 1, or 0 (4 × minibatch_size)");
    if (r.b_min() > c.train().minibatch_size())
      return bad("train.adaptive_batch.b_min", std::to_string(r.b_min()) + " is above " + mb +
                                                   ", the mean batch the workers keep");
    if (r.b_max() < c.train().minibatch_size())
      return bad("train.adaptive_batch.b_max", std::to_string(r.b_max()) + " is below " + mb +
                                                   ", the mean batch the workers keep");
    if (ab.warmup_clocks() < 0) return bad("train.adaptive_batch.warmup_clocks", "must be ≥ 0");
    if (ab.window_clocks() < 1) return bad("train.adaptive_batch.window_clocks", "must be ≥ 1");
    if (!(ab.smoothing() > 0 && ab.smoothing() <= 1))
      return bad("train.adaptive_batch.smoothing", "must be in (0, 1] (1: move to the new size at once)");
  }
  if (c.train().eval_minibatch_size() < 1) return bad("train.eval_minibatch_size", "must be ≥ 1");
  if (c.train().chunk_rows() < 0)
    return bad("train.chunk_rows", "must be ≥ 0 (0: 4 x train.minibatch_size), got " +
                                       std::to_string(c.train().chunk_rows()));
  if (c.train().chunk_bytes() < 0)
    return bad("train.chunk_bytes", "must be ≥ 0 (0: train.chunk_rows x the mean bytes per row of the first "
                                    "training file), got " + std::to_string(c.train().chunk_bytes()));
  if (!(c.train().divergence_factor() > 1) || !std::isfinite(c.train().divergence_factor()))
    return bad("train.divergence_factor", "must be a finite number > 1");
  if (!(c.train().psp_a() > 0) || !std::isfinite(c.train().psp_a()))
    return bad("train.psp_a", "must be a finite number > 0");
  if (!(c.train().psp_b() > 0) || !std::isfinite(c.train().psp_b()))
    return bad("train.psp_b", "must be a finite number > 0");
  const std::string& dev = c.train().device();
  if (dev != "auto" && dev != "cpu" && dev != "cuda") return bad("train.device", "must be auto, cpu or cuda, got '" + dev + "'");
  // The same checks as a server runs on the table specs at HELLO (C22).
  auto check_opt = [&](const OptimizerConfig& o, const std::string& where) -> Status {
    std::string why;
    const std::string field = OptimizerProblem(o, &why);
    if (!field.empty()) return bad(where + "." + field, why);
    return Status::OK();
  };
  TETHER_RETURN_IF_ERROR(check_opt(c.optimizer(), "optimizer"));
  for (const auto& t : c.table()) {
    if (t.name().empty()) return bad("table.name", "is required in every table { } section");
    TETHER_RETURN_IF_ERROR(check_opt(t.optimizer(), "table[" + t.name() + "].optimizer"));
  }
  return Status::OK();
}

Status CheckDataFilesExist(const JobConfig& config) {
  const DataConfig& d = config.data();
  const std::pair<const char*, const std::string*> files[] = {
      {"train_file", &d.train_file()},         {"test_file", &d.test_file()},
      {"train_split", &d.train_split()},       {"test_split", &d.test_split()},
      {"train_label_file", &d.train_label_file()}, {"test_label_file", &d.test_label_file()},
      {"label_xml", &d.label_xml()}};
  for (const auto& [field, spec] : files) {
    if (spec->empty()) continue;
    // train_file / test_file may list several files or patterns: each must
    // exist (a pattern matching nothing is ExpandFileList's NotFound).
    std::vector<std::string> paths{*spec};
    if ((std::string(field) == "train_file" || std::string(field) == "test_file") && IsFileList(*spec)) {
      TETHER_ASSIGN_OR_RETURN(paths, ExpandFileList(*spec, std::string("data.") + field));
    }
    for (const std::string& path : paths) {
      std::error_code ec;
      const std::filesystem::path p(path);
      if (std::filesystem::is_regular_file(p, ec)) continue;
      const std::filesystem::path full = std::filesystem::absolute(p, ec).lexically_normal();
      std::string msg = std::string("config field data.") + field + ": '" + path + "' " +
                        (std::filesystem::exists(p, ec) ? "is not a file" : "does not exist");
      if (p.is_relative()) {
        msg += " (tried " + full.string() + ", relative to the current directory " +
               std::filesystem::current_path(ec).string() + ")";
      }
      return Status::NotFound(msg);
    }
  }
  return Status::OK();
}

ConsistencyConfig ConsistencyForTable(const JobConfig& config, const std::string& name) {
  ConsistencyConfig c = config.consistency();
  for (const auto& t : config.table())
    if (t.name() == name && t.has_consistency()) {
      // A table that names its model without a bound inherits none.
      if (t.consistency().has_model() && !t.consistency().has_staleness()) c.clear_staleness();
      c.MergeFrom(t.consistency());
    }
  return c;
}

std::string StalenessName(int64_t s) {
  if (s < 0) return "inf (ASP)";
  if (s == 0) return "0 (BSP)";
  return std::to_string(s) + " (SSP)";
}

std::string ConfigSummary(const JobConfig& config) {
  // One entry per set section, in the schema's order, its fields packed into
  // lines of at most ~100 characters: a reader finds "  data {" at once, and
  // no line runs off the screen.
  constexpr size_t kWidth = 100;
  std::string out;
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  // `head` then `items` separated by spaces, wrapped with a 6-space indent.
  auto emit = [&](const std::string& head, const std::vector<std::string>& items, const std::string& tail) {
    std::string line = "  " + head;
    for (const std::string& item : items) {
      if (line.size() + 1 + item.size() > kWidth && line.find_first_not_of(' ') != line.size() - head.size()) {
        out += line + "\n";
        line = "     ";
      }
      line += " " + item;
    }
    out += line + tail + "\n";
  };
  auto fields_of = [&](const Message& m) {
    std::vector<const FieldDescriptor*> set;
    m.GetReflection()->ListFields(m, &set);
    std::vector<std::string> items;
    for (const FieldDescriptor* f : set) {
      const int n = f->is_repeated() ? m.GetReflection()->FieldSize(m, f) : 1;
      for (int i = 0; i < n; ++i) {
        std::string v;
        printer.PrintFieldValueToString(m, f, f->is_repeated() ? i : -1, &v);
        while (!v.empty() && v.back() == ' ') v.pop_back();
        items.push_back(f->name() + (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE ? " { " + v + " }" : ": " + v));
      }
    }
    return items;
  };
  const Reflection* r = config.GetReflection();
  std::vector<const FieldDescriptor*> sections;
  r->ListFields(config, &sections);
  for (const FieldDescriptor* f : sections) {
    const int n = f->is_repeated() ? r->FieldSize(config, f) : 1;
    for (int i = 0; i < n; ++i) {
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        const Message& m = f->is_repeated() ? r->GetRepeatedMessage(config, f, i) : r->GetMessage(config, f);
        emit(f->name() + " {", fields_of(m), " }");
      } else {
        std::string v;
        printer.PrintFieldValueToString(config, f, f->is_repeated() ? i : -1, &v);
        emit(f->name() + ":", {v}, "");
      }
    }
  }
  out += "  staleness in force: " + StalenessName(EffectiveStaleness(config.consistency()));
  for (const auto& t : config.table())
    if (t.has_consistency())
      out += ", table " + t.name() + ": " + StalenessName(EffectiveStaleness(ConsistencyForTable(config, t.name())));
  return out;
}

std::string JobId(const JobConfig& config) {
  return config.cluster().job_id().empty() ? config.name() : config.cluster().job_id();
}

int MaxWorkers(const ClusterConfig& cluster) {
  return cluster.max_workers() > 0 ? cluster.max_workers() : cluster.num_workers();
}

Status CheckWorkerRank(const JobConfig& config, int rank, bool has_data) {
  const int initial = config.cluster().num_workers(), bound = MaxWorkers(config.cluster());
  if (rank < 0 || rank >= bound)
    return Status::InvalidArgument(
        "rank " + std::to_string(rank) + " outside [0, " + std::to_string(bound) + ") (cluster.max_workers = " +
        std::to_string(bound) + (config.cluster().max_workers() > 0 ? "" : ", i.e. cluster.num_workers") +
        "): raise cluster.max_workers to let more workers join");
  if (rank >= initial && !has_data)
    return Status::FailedPrecondition(
        "rank " + std::to_string(rank) + " joins beyond the job's " + std::to_string(initial) +
        " initial worker(s) (cluster.num_workers), but the static split of the data (data.train_split) has no "
        "share for it: a joining worker needs train.data_on_demand, which deals rows to any rank");
  if (rank >= initial && !config.checkpoint().dir().empty())
    return Status::FailedPrecondition(
        "rank " + std::to_string(rank) + " joins beyond the job's " + std::to_string(initial) +
        " initial worker(s), but the job takes checkpoints (checkpoint.dir): a worker that joins while a "
        "checkpoint is being cut could start at the cut's clock and never take part in it (the checkpoint would "
        "wait for it) or push updates past the cut into it, so joins and checkpoints do not combine yet "
        "(data on demand itself checkpoints and resumes with any number of workers: docs/OPERATIONS.md)");
  return Status::OK();
}

AdaptiveBatchConfig ResolvedAdaptiveBatch(const TrainConfig& train) {
  AdaptiveBatchConfig r = train.adaptive_batch();
  if (r.b_min() == 0) r.set_b_min(std::max(1, train.minibatch_size() / 4));
  if (r.b_max() == 0) r.set_b_max(4 * train.minibatch_size());
  return r;
}

int64_t EffectiveChunkRows(const TrainConfig& train) {
  return train.chunk_rows() > 0 ? train.chunk_rows() : 4 * static_cast<int64_t>(std::max(1, train.minibatch_size()));
}

}  // namespace tether
