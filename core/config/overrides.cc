// The flags that override config fields: the one table of them
// (ConfigOverrides), setting a field from a flag's text (ApplyOverride), and
// refusing a flag the job in force would ignore (CheckOverridesApply).
#include "core/config.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <iterator>
#include <memory>
#include <sstream>

#include "core/config/config_internal.h"
#include "core/memory_fit.h"

namespace tether {
namespace {

using config_internal::FirstErrorCollector;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

// One row per flag, in the order --help lists them.
const ConfigOverride kOverrideTable[] = {
    {"staleness", "consistency.staleness", "staleness bound s in clocks: 0 = BSP, N = SSP, inf = ASP"},
    {"num_servers", "cluster.num_servers", "number of server shards"},
    {"num_workers", "cluster.num_workers", "number of workers"},
    {"max_workers", "cluster.max_workers", "bound on worker ranks: ranks in [num_workers, max_workers) may join a running job (0: num_workers)"},
    {"replicas", "cluster.replicas", "copies of each shard, held by the server processes of the next shards; one takes over when the shard's process dies (0: none; less than num_servers, at most 8; not in-process)"},
    {"epochs", "train.epochs", "passes over each worker's training rows"},
    {"minibatch_size", "train.minibatch_size", "rows per minibatch"},
    {"minibatches_per_clock", "train.minibatches_per_clock", "minibatches between clock ticks"},
    {"seed", "train.seed", "random seed (init, shuffling)"},
    {"threads", "train.threads", "compute threads per worker"},
    {"device", "train.device", "compute backend: auto | cpu | cuda"},
    {"learning_rate", "optimizer.learning_rate", "server-side optimizer step size"},
    {"optimizer", "optimizer.type", "server-side optimizer: sgd | adagrad | adam | ftrl (sum | noop: tests, benchmarks)"},
    {"hidden", "model.hidden", "hidden-layer width"},
    {"dropout", "model.dropout", "dropout rate of the hidden layers' activations while training, in [0, 1) (0: none)"},
    {"input_dropout", "model.input_dropout", "dropout rate of the input features while training (XMC_MLP), in [0, 1) (0: none)"},
    {"label_smoothing", "model.label_smoothing", "label smoothing of the training loss, in [0, 1) (0: none)"},
    {"loss", "model.loss", "softmax | bce"},
    {"normalize_rows", "data.normalize_rows", "scale each row's features to unit L2 norm: true | false"},
    {"tf_idf", "data.tf_idf", "weigh each feature by its inverse document frequency over the training rows, before normalize_rows: true | false"},
    {"l2", "optimizer.l2", "L2 regularisation added to every gradient"},
    {"weight_decay", "optimizer.weight_decay", "ADAM: weight decay decoupled from the moments (AdamW), w *= 1 - lr x this per step (0: none)"},
    {"delay_compensation", "optimizer.delay_compensation", "delay compensation for asynchronous pushes (DC-ASGD): lambda >= 0 of g + lambda g*g*(w_now - w_read) on the servers (0: off)"},
    {"lr_schedule", "optimizer.schedule.decay", "learning-rate decay by clock after the warm-up: constant | cosine | linear"},
    {"warmup_epochs", "optimizer.schedule.warmup_epochs", "learning-rate warm-up, in epochs of the job (0: none)"},
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
    {"wire", "train.wire", "every table's wire encoding of pulled values and pushed gradients: fp32 | bf16 | fp16 (the servers keep fp32; docs/RUNNING.md)"},
    {"error_feedback", "train.error_feedback", "with 16-bit pushes, each row's rounding residual is added to its next push: true | false"},
    {"pipeline", "train.pipeline", "overlap the next minibatch's input-row pull and the output layer's push with compute (exact; docs/RUNNING.md): true | false"},
    {"staleness_policy", "consistency.staleness_policy", "step scaling for stale pushes: none | inverse | inverse_plus_one"},
    {"consistency_model", "consistency.model", "consistency model: ssp | bsp | asp | average (weighted model averaging)"},
    {"period_rows", "consistency.period_rows", "model AVERAGE: rows a worker trains its replica on per round"},
    {"model_momentum", "consistency.model_momentum", "model AVERAGE: momentum m of the merge, in [0, 1)"},
    {"heartbeat_interval_ms", "cluster.heartbeat_interval_ms", "a worker sends a heartbeat this often while it waits on the servers; any message counts as one"},
    {"worker_timeout_ms", "cluster.worker_timeout_ms", "a worker silent this long is removed (or fails the job)"},
    {"liveness_timeout_ms", "cluster.liveness_timeout_ms", "a worker gives up a server whose connection is down this long (0: off)"},
    {"startup_timeout_ms", "cluster.startup_timeout_ms", "servers: every worker joins within this of the first HELLO; workers: the servers are found and reached within this"},
    {"idle_timeout_ms", "cluster.idle_timeout_ms", "a server that takes in no message at all for this long exits with an error (workers gone?)"},
    {"server_secret_key_file", "security.curve.server_secret_key_file", "CURVE: the servers' key pair (NAME.key from tether-keygen); servers"},
    {"server_public_key_file", "security.curve.server_public_key_file", "CURVE: the servers' public key (NAME.pub); workers"},
    {"client_secret_key_file", "security.curve.client_secret_key_file", "CURVE: this worker's key pair (NAME.key); workers"},
    {"client_public_key_file", "security.curve.client_public_key_file", "CURVE: this worker's public key, checked against its key pair (optional); workers"},
    {"authorized_keys", "security.curve.authorized_keys", "CURVE: comma-separated worker .pub files or directories of them; servers"},
    {"eval_every_epochs", "train.eval_every_epochs", "every worker evaluates its part of the test set every N epochs during training, rank 0 reports (0: at the end only)"},
    {"metrics_dir", "train.metrics_dir", "every process writes JSON-lines metrics to DIR/<role>-<rank>.jsonl (an earlier run's file moved aside)"},
    {"progress_every_s", "train.progress_every_s", "seconds between progress lines (0: none)"},
    {"eval_max_rows", "train.eval_max_rows", "evaluate on the first N test rows only (0: all)"},
    {"fail_on_divergence", "train.fail_on_divergence", "exit 3 when the training loss diverges (default true; --nofail_on_divergence accepts a diverged run)"},
    {"accept_partial_eval", "train.accept_partial_eval", "accept a final evaluation that covered only part of the test set (workers left) with exit 0; default: exit 4"},
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
    {"server_memory", "cluster.server_memory_bytes", "bytes each server shard may spend on the job's tables and optimizer state, split across its row tables: 2GiB, 512MB, bytes (0: no budget)"},
    {"memory_limit", "consistency.memory_limit_bytes", "memory this process may count on for the job's tables or cache, checked at start-up: 8GiB, ... (0: MemAvailable)"},
};

}  // namespace

const std::vector<ConfigOverride>& ConfigOverrides() {
  static const std::vector<ConfigOverride> kOverrides(std::begin(kOverrideTable), std::end(kOverrideTable));
  return kOverrides;
}

bool OverrideIsBool(const ConfigOverride& row) {
  const google::protobuf::Descriptor* type = JobConfig::descriptor();
  const std::string path = row.field_path;
  size_t begin = 0;
  while (type != nullptr) {
    const size_t dot = path.find('.', begin);
    const FieldDescriptor* field = type->FindFieldByName(path.substr(begin, dot - begin));
    if (field == nullptr) return false;
    if (dot == std::string::npos) return field->cpp_type() == FieldDescriptor::CPPTYPE_BOOL && !field->is_repeated();
    type = field->message_type();
    begin = dot + 1;
  }
  return false;
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

namespace {

// The message holding the field at dotted `field_path` of *config, and the
// field. Errors: Internal when the path names no field or runs through
// something other than singular messages (a bug in the table).
StatusOr<std::pair<Message*, const FieldDescriptor*>> FindField(JobConfig* config, const std::string& field_path) {
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
  return std::make_pair(msg, field);
}

// A list of strings (security.curve.authorized_keys): comma-separated,
// replacing the config's list.
void SetStringList(Message* msg, const FieldDescriptor* field, const std::string& value) {
  msg->GetReflection()->ClearField(msg, field);
  size_t begin = 0;
  while (begin <= value.size()) {
    const size_t comma = std::min(value.find(',', begin), value.size());
    if (comma > begin) msg->GetReflection()->AddString(msg, field, value.substr(begin, comma - begin));
    begin = comma + 1;
  }
}

// Enum names are upper case in the schema; flags accept any case. "" when
// *text (made upper case) names a value, else the lower-case names.
std::string EnumNamesUnless(const FieldDescriptor* field, std::string* text) {
  std::transform(text->begin(), text->end(), text->begin(), ::toupper);
  if (field->enum_type()->FindValueByName(*text) != nullptr) return "";
  std::string names;
  for (int i = 0; i < field->enum_type()->value_count(); ++i) {
    std::string n = field->enum_type()->value(i)->name();
    std::transform(n.begin(), n.end(), n.begin(), ::tolower);
    names += (i ? ", " : "") + n;
  }
  return names;
}

using BadValue = std::function<Status(const std::string& why)>;

// Byte sizes with units; the cache capacity also as a percentage of the
// model (cache_capacity_fraction). The two capacity fields exclude each
// other: setting one clears the other.
Status SetByteSize(JobConfig* config, const std::string& field_path, const std::string& value, const BadValue& bad) {
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
  } else if (field_path == "cluster.server_memory_bytes") {
    config->mutable_cluster()->set_server_memory_bytes(*bytes);
  } else {
    c->set_memory_limit_bytes(*bytes);
  }
  return Status::OK();
}

// What setting consistency.model or consistency.staleness by flag implies
// for the rest of the consistency settings.
void FollowConsistency(JobConfig* config, const std::string& field_path) {
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
  if (field_path == "consistency.staleness") {
    // One bound for the whole run: the model follows the number and
    // per-table bounds give way to it.
    config->mutable_consistency()->set_model(config->consistency().staleness() == -1 ? ASP : SSP);
    for (auto& t : *config->mutable_table()) {
      t.mutable_consistency()->clear_model();
      t.mutable_consistency()->clear_staleness();
    }
  }
}

// --wire and --error_feedback are job-wide: the tables' own settings give
// way to them, as per-table bounds give way to --staleness.
void FollowWire(JobConfig* config, const std::string& field_path) {
  for (auto& t : *config->mutable_table()) {
    if (field_path == "train.wire") {
      t.clear_wire();
      t.clear_pull_wire();
      t.clear_push_wire();
    }
    if (field_path == "train.error_feedback") t.clear_error_feedback();
  }
}

}  // namespace

Status ApplyOverride(JobConfig* config, const std::string& field_path, const std::string& value,
                     const std::string& source) {
  TETHER_ASSIGN_OR_RETURN(auto found, FindField(config, field_path));
  auto [msg, field] = found;
  if (field->is_repeated() && field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
    SetStringList(msg, field, value);
    return Status::OK();
  }
  if (field->is_repeated() || field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE)
    return Status::Internal("config field " + field_path + " is not a scalar");
  const BadValue bad = [&](const std::string& why) {
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
    if (const std::string names = EnumNamesUnless(field, &text); !names.empty())
      return bad("expected one of " + names);
  }
  if (field_path == "consistency.cache_capacity_bytes" || field_path == "consistency.memory_limit_bytes" ||
      field_path == "cluster.server_memory_bytes")
    return SetByteSize(config, field_path, value, bad);
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
  FollowConsistency(config, field_path);
  FollowWire(config, field_path);
  return Status::OK();
}

namespace {

// Whether any table pushes 16-bit values: train.wire, or a table section's
// wire or push_wire (model_registry.cc SetTableWire resolves them so).
bool PushesHalf(const JobConfig& c) {
  const auto half = [](WireEncoding e) { return e == BF16 || e == FP16; };
  if (half(c.train().wire())) return true;
  for (const auto& t : c.table())
    if ((t.has_push_wire() && half(t.push_wire())) || (!t.has_push_wire() && t.has_wire() && half(t.wire())))
      return true;
  return false;
}

// Whether an optimizer in force steps by optimizer.learning_rate: FTRL
// steps by its alpha and NOOP not at all, unless a table section names a
// type that reads it.
bool ReadsLearningRate(const JobConfig& c) {
  const auto reads = [](OptimizerType t) { return t != FTRL && t != NOOP; };
  if (reads(c.optimizer().type())) return true;
  for (const auto& t : c.table())
    if (t.optimizer().has_type() && reads(t.optimizer().type())) return true;
  return false;
}

}  // namespace

std::string InProcessIgnores(const std::string& flag) {
  if (flag == "liveness_timeout_ms")
    return "a one-process job has no connection to a server to watch (tcp and ipc only)";
  if (flag == "rendezvous") return "a one-process job's shards publish no endpoints and its workers look none up";
  for (const ConfigOverride& row : ConfigOverrides())
    if (flag == row.flag && std::string(row.field_path).rfind("security.curve.", 0) == 0)
      return "a one-process job's traffic never leaves the process, so CURVE has nothing to encrypt";
  return "";
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
      // Float32 pushes have no rounding error to feed back: the flag would
      // change nothing.
      {"error_feedback", "16-bit pushes (train.wire, or a table's wire or push_wire, BF16 or FP16)",
       "--wire=bf16", &PushesHalf},
      // The config field is accepted (a search space may draw it for every
      // optimizer type); the flag names one run's intent.
      {"learning_rate", "an optimizer that steps by it (optimizer.type SGD, ADAGRAD, ADAM or SUM; FTRL steps by "
       "optimizer.alpha)", "--optimizer=adagrad", &ReadsLearningRate},
  };
  for (const auto& [flag, value] : set)
    for (const Needs& n : kNeeds)
      if (flag == n.flag && !n.holds(config))
        return Status::InvalidArgument("flag --" + flag + "=" + value + " is only read with " + n.setting +
                                       ", which this job does not set: add " + n.enable + ", or drop --" + flag);
  return Status::OK();
}

}  // namespace tether
