#include "core/config.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

namespace tether {
namespace {

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

void CollectFieldNames(const Descriptor* d, std::vector<std::string>* out, int depth = 0) {
  if (depth > 4) return;
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    out->push_back(f->name());
    if (f->type() == FieldDescriptor::TYPE_MESSAGE) CollectFieldNames(f->message_type(), out, depth + 1);
  }
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
  if (!parser.ParseFromString(text, &config)) {
    std::string msg = name + ":" + std::to_string(errors.line()) + ": " + errors.message();
    // Protobuf says: Message type "tether.JobConfig" has no field named "staleness_bond".
    static const std::regex kUnknown("has no field named \"([^\"]+)\"");
    std::smatch m;
    if (std::regex_search(errors.message(), m, kUnknown)) {
      std::vector<std::string> names;
      CollectFieldNames(JobConfig::descriptor(), &names);
      std::string guess = ClosestName(m[1].str(), names);
      msg = name + ":" + std::to_string(errors.line()) + ": unknown field '" + m[1].str() + "'";
      if (!guess.empty()) msg += " (did you mean '" + guess + "'?)";
    }
    return Status::InvalidArgument(msg);
  }
  return config;
}

StatusOr<JobConfig> LoadJobConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound(path + ": cannot open config file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseJobConfig(ss.str(), path);
}

const std::vector<ConfigOverride>& ConfigOverrides() {
  static const std::vector<ConfigOverride> kOverrides = {
      {"staleness", "consistency.staleness", "staleness bound s in clocks: 0 = BSP, N = SSP, inf = ASP"},
      {"num_servers", "cluster.num_servers", "number of server shards"},
      {"num_workers", "cluster.num_workers", "number of workers"},
      {"epochs", "train.epochs", "passes over each worker's training rows"},
      {"minibatch_size", "train.minibatch_size", "rows per minibatch"},
      {"minibatches_per_clock", "train.minibatches_per_clock", "minibatches between clock ticks"},
      {"seed", "train.seed", "random seed (init, shuffling)"},
      {"threads", "train.threads", "compute threads per worker"},
      {"device", "train.device", "compute backend: auto | cpu | cuda"},
      {"learning_rate", "optimizer.learning_rate", "server-side optimizer step size"},
      {"optimizer", "optimizer.type", "server-side optimizer: sgd | adagrad | adam"},
      {"hidden", "model.hidden", "hidden-layer width"},
      {"loss", "model.loss", "softmax | bce"},
      {"normalize_rows", "data.normalize_rows", "scale each row's features to unit L2 norm: true | false"},
      {"l2", "optimizer.l2", "L2 regularisation added to every gradient"},
      {"index_base", "data.index_base", "index base of the data files: 0 or 1"},
      {"train_file", "data.train_file", "training data file"},
      {"test_file", "data.test_file", "test data file"},
      {"request_timeout_ms", "cluster.request_timeout_ms", "timeout for a reply from a server"},
  };
  return kOverrides;
}

Status ApplyOverride(JobConfig* config, const std::string& field_path, const std::string& value,
                     const std::string& source) {
  Message* msg = config;
  std::string rest = field_path;
  const FieldDescriptor* field = nullptr;
  while (true) {
    size_t dot = rest.find('.');
    std::string part = rest.substr(0, dot);
    field = msg->GetDescriptor()->FindFieldByName(part);
    if (field == nullptr) return Status::Internal("no config field " + field_path);
    if (dot == std::string::npos) break;
    msg = msg->GetReflection()->MutableMessage(msg, field);
    rest = rest.substr(dot + 1);
  }
  const Reflection* r = msg->GetReflection();
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument(source + "=" + value + ": " + why + " (field " + field_path + ")");
  };
  std::string v = value;
  if (field_path == "consistency.staleness") {
    std::string lower = v;
    std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
    if (lower == "inf" || lower == "asp" || lower == "infinity") v = "-1";
    if (lower == "bsp") v = "0";
  }
  try {
    size_t used = 0;
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32: {
        long long x = std::stoll(v, &used);
        if (used != v.size() || x < INT32_MIN || x > INT32_MAX) return bad("not a 32-bit integer");
        r->SetInt32(msg, field, static_cast<int32_t>(x));
        break;
      }
      case FieldDescriptor::CPPTYPE_INT64: {
        long long x = std::stoll(v, &used);
        if (used != v.size()) return bad("not an integer");
        r->SetInt64(msg, field, x);
        break;
      }
      case FieldDescriptor::CPPTYPE_UINT64: {
        if (!v.empty() && v[0] == '-') return bad("must be non-negative");
        unsigned long long x = std::stoull(v, &used);
        if (used != v.size()) return bad("not an integer");
        r->SetUInt64(msg, field, x);
        break;
      }
      case FieldDescriptor::CPPTYPE_UINT32: {
        unsigned long long x = std::stoull(v, &used);
        if (used != v.size() || x > UINT32_MAX) return bad("not a 32-bit unsigned integer");
        r->SetUInt32(msg, field, static_cast<uint32_t>(x));
        break;
      }
      case FieldDescriptor::CPPTYPE_FLOAT: {
        float x = std::stof(v, &used);
        if (used != v.size() || !std::isfinite(x)) return bad("not a finite number");
        r->SetFloat(msg, field, x);
        break;
      }
      case FieldDescriptor::CPPTYPE_DOUBLE: {
        double x = std::stod(v, &used);
        if (used != v.size() || !std::isfinite(x)) return bad("not a finite number");
        r->SetDouble(msg, field, x);
        break;
      }
      case FieldDescriptor::CPPTYPE_BOOL: {
        if (v == "true" || v == "1") r->SetBool(msg, field, true);
        else if (v == "false" || v == "0") r->SetBool(msg, field, false);
        else return bad("not a boolean");
        break;
      }
      case FieldDescriptor::CPPTYPE_STRING:
        r->SetString(msg, field, v);
        break;
      case FieldDescriptor::CPPTYPE_ENUM: {
        std::string upper = v;
        std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
        const auto* ev = field->enum_type()->FindValueByName(upper);
        if (ev == nullptr) {
          std::string names;
          for (int i = 0; i < field->enum_type()->value_count(); ++i) {
            std::string n = field->enum_type()->value(i)->name();
            std::transform(n.begin(), n.end(), n.begin(), ::tolower);
            names += (i ? ", " : "") + n;
          }
          return bad("expected one of " + names);
        }
        r->SetEnum(msg, field, ev);
        break;
      }
      default:
        return Status::Internal("unsupported override type for " + field_path);
    }
  } catch (const std::exception&) {
    return bad("cannot parse the value");
  }
  return Status::OK();
}

Status ValidateJobConfig(const JobConfig& c) {
  auto bad = [](const std::string& field, const std::string& why) {
    return Status::InvalidArgument("config field " + field + ": " + why);
  };
  if (c.cluster().num_servers() < 1) return bad("cluster.num_servers", "must be ≥ 1");
  if (c.cluster().num_workers() < 1) return bad("cluster.num_workers", "must be ≥ 1");
  if (c.cluster().server_addresses_size() != 0 &&
      c.cluster().server_addresses_size() != c.cluster().num_servers())
    return bad("cluster.server_addresses", "has " + std::to_string(c.cluster().server_addresses_size()) +
                                               " entries but cluster.num_servers is " +
                                               std::to_string(c.cluster().num_servers()));
  if (c.data().index_base() != 0 && c.data().index_base() != 1)
    return bad("data.index_base", "must be set to 0 or 1 (it is never guessed from the data)");
  if (c.data().train_file().empty()) return bad("data.train_file", "is required");
  if (c.data().num_features() <= 0) return bad("data.num_features", "must be > 0 (the model's input width)");
  if (c.data().num_labels() <= 0) return bad("data.num_labels", "must be > 0 (the model's output width)");
  if (c.model().hidden() < 1) return bad("model.hidden", "must be ≥ 1");
  if (c.consistency().staleness() < -1) return bad("consistency.staleness", "must be ≥ 0, or -1 (inf) for ASP");
  if (c.train().epochs() < 1) return bad("train.epochs", "must be ≥ 1");
  if (c.train().minibatch_size() < 1) return bad("train.minibatch_size", "must be ≥ 1");
  if (c.train().minibatches_per_clock() < 1) return bad("train.minibatches_per_clock", "must be ≥ 1");
  if (c.train().threads() < 1) return bad("train.threads", "must be ≥ 1");
  if (c.train().eval_minibatch_size() < 1) return bad("train.eval_minibatch_size", "must be ≥ 1");
  const std::string& dev = c.train().device();
  if (dev != "auto" && dev != "cpu" && dev != "cuda") return bad("train.device", "must be auto, cpu or cuda, got '" + dev + "'");
  auto check_opt = [&](const OptimizerConfig& o, const std::string& where) -> Status {
    if (!(o.learning_rate() > 0) || !std::isfinite(o.learning_rate()))
      return bad(where + ".learning_rate", "must be a finite number > 0");
    if (o.momentum() < 0 || o.momentum() >= 1) return bad(where + ".momentum", "must be in [0, 1)");
    if (o.initial_accumulator() < 0) return bad(where + ".initial_accumulator", "must be ≥ 0");
    if (o.l2() < 0) return bad(where + ".l2", "must be ≥ 0");
    return Status::OK();
  };
  TETHER_RETURN_IF_ERROR(check_opt(c.optimizer(), "optimizer"));
  for (const auto& t : c.table()) {
    if (t.name() != "w1" && t.name() != "b1" && t.name() != "w2")
      return bad("table.name", "unknown table '" + t.name() + "' (the XMC MLP has w1, b1, w2)");
    TETHER_RETURN_IF_ERROR(check_opt(t.optimizer(), "table[" + t.name() + "].optimizer"));
  }
  return Status::OK();
}

std::string StalenessName(int64_t s) {
  if (s < 0) return "inf (ASP)";
  if (s == 0) return "0 (BSP)";
  return std::to_string(s) + " (SSP)";
}

std::string ConfigSummary(const JobConfig& config) {
  std::string text;
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  printer.PrintToString(config, &text);
  return text + " | staleness " + StalenessName(config.consistency().staleness());
}

std::vector<TableSpec> TablesForJob(const JobConfig& config) {
  const int64_t h = config.model().hidden();
  const double f = static_cast<double>(config.data().num_features());
  const double l = static_cast<double>(config.data().num_labels());
  const float scale = config.model().init_scale();
  auto optimizer_for = [&](const std::string& name) {
    OptimizerConfig o = config.optimizer();
    for (const auto& t : config.table())
      if (t.name() == name) o.MergeFrom(t.optimizer());
    return o;
  };
  std::vector<TableSpec> tables(3);
  tables[0].id = 0;
  tables[0].name = "w1";
  tables[0].kind = TableKind::kRow;
  tables[0].dim = static_cast<uint32_t>(h);
  tables[0].init = InitKind::kUniform;
  tables[0].init_bound = scale * static_cast<float>(std::sqrt(6.0 / (f + h)));
  tables[1].id = 1;
  tables[1].name = "b1";
  tables[1].kind = TableKind::kDense;
  tables[1].size = static_cast<uint64_t>(h);
  tables[1].init = InitKind::kZeros;
  tables[2].id = 2;
  tables[2].name = "w2";
  tables[2].kind = TableKind::kRow;
  tables[2].dim = static_cast<uint32_t>(h + 1);
  tables[2].init = InitKind::kUniform;
  tables[2].init_bound = scale * static_cast<float>(std::sqrt(6.0 / (h + l)));
  for (auto& t : tables) t.optimizer = optimizer_for(t.name);
  return tables;
}

std::string ModelFingerprint(const std::vector<TableSpec>& tables) {
  std::ostringstream os;
  for (const auto& t : tables) {
    std::string opt;
    google::protobuf::TextFormat::Printer printer;
    printer.SetSingleLineMode(true);
    printer.PrintToString(t.optimizer, &opt);
    os << t.name << (t.kind == TableKind::kRow ? "[row dim=" : "[dense size=")
       << (t.kind == TableKind::kRow ? t.dim : t.size) << " init=" << t.init_bound << " opt={" << opt << "}] ";
  }
  return os.str();
}

}  // namespace tether
