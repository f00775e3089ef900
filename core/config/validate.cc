// Checking a job config: the sections a server reads (ValidateServerConfig),
// the whole job (ValidateJobConfig), the data files on disk, and a worker's
// rank (core/config.h).
#include "core/config.h"

#include <google/protobuf/descriptor.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <utility>

#include "core/data_files.h"
#include "core/endpoint_list.h"
#include "core/names.h"
#include "core/schedule_config.h"
#include "core/validation_metric.h"

namespace tether {
namespace {

// data.tf_idf's widest input: 2^22 document counts are at most 40 MiB per
// worker in round 0's messages (varints of 10 bytes at most).
constexpr int64_t kMaxTfIdfFeatures = int64_t{1} << 22;

// Why replicas need processes of their own, for the messages below.
constexpr char kInProcessReplicas[] =
    "every shard of an in-process job runs in one process, so a replica would end with its primary; run the "
    "servers as processes (tether-launch --transport=tcp), or set cluster.replicas to 0 (--replicas=0)";

// "config field FIELD: WHY", the form of every message here.
Status FieldError(const std::string& field, const std::string& why) {
  return Status::InvalidArgument("config field " + field + ": " + why);
}

}  // namespace

namespace {

// Consistency model AVERAGE (server/model_average.h): job-wide, rounds
// closed like BSP, and an optimizer whose step a local replica can take.
Status ValidateAverage(const JobConfig& c) {
  const ConsistencyConfig& j = c.consistency();
  const bool average = j.model() == AVERAGE;
  for (const auto& t : c.table()) {
    const ConsistencyConfig& tc = t.consistency();
    const std::string where = "table[" + t.name() + "].consistency.";
    if (tc.has_model() && tc.model() == AVERAGE)
      return FieldError(where + "model", "AVERAGE is job-wide (one merge round for every table): set it in the job's "
                                  "consistency section");
    if (tc.has_period_rows() || tc.has_model_momentum())
      return FieldError(where + (tc.has_period_rows() ? "period_rows" : "model_momentum"),
                 "is job-wide: set it in the job's consistency section");
    if (average && (tc.has_model() || tc.has_staleness()))
      return FieldError(where + (tc.has_model() ? "model" : "staleness"),
                 "consistency.model is AVERAGE: every table merges on the job's rounds, so a table may not name "
                 "its own model or staleness");
    if (average && t.has_optimizer() &&
        (t.optimizer().type() == FTRL || t.optimizer().type() == SUM || t.optimizer().type() == NOOP))
      return FieldError("table[" + t.name() + "].optimizer.type",
                 OptimizerType_Name(t.optimizer().type()) +
                     " cannot train a local replica under consistency.model AVERAGE (use SGD, ADAGRAD or ADAM)");
  }
  if (!average) {
    if (j.has_period_rows()) return FieldError("consistency.period_rows", "is only read with consistency.model AVERAGE");
    if (j.has_model_momentum())
      return FieldError("consistency.model_momentum", "is only read with consistency.model AVERAGE");
    return Status::OK();
  }
  if (j.period_rows() < 1)
    return FieldError("consistency.period_rows", "must be ≥ 1 with consistency.model AVERAGE (rows a worker trains its "
                                          "replica on before it pushes its delta), got " +
                                              std::to_string(j.period_rows()));
  if (!(j.model_momentum() >= 0 && j.model_momentum() < 1))
    return FieldError("consistency.model_momentum", "must be in [0, 1), got " + std::to_string(j.model_momentum()));
  if (j.staleness() != 0)
    return FieldError("consistency.staleness", "must be 0 (or unset) with consistency.model AVERAGE: a round's pulls "
                                        "wait for the previous round's merge (got " +
                                            std::to_string(j.staleness()) + ")");
  if (j.staleness_policy() != NONE)
    return FieldError("consistency.staleness_policy", "does not apply with consistency.model AVERAGE (deltas are merged "
                                               "by round, not stepped by staleness)");
  const OptimizerType o = c.optimizer().type();
  if (o == FTRL || o == SUM || o == NOOP)
    return FieldError("optimizer.type", OptimizerType_Name(o) +
                                     " cannot train a local replica under consistency.model AVERAGE (use SGD, "
                                     "ADAGRAD or ADAM)");
  // Delay compensation corrects a pushed gradient on the servers; under
  // AVERAGE the servers merge deltas and take no gradient.
  if (c.optimizer().delay_compensation() > 0)
    return FieldError("optimizer.delay_compensation", "corrects pushed gradients on the servers; under "
                                                      "consistency.model AVERAGE the servers merge model deltas: "
                                                      "drop it");
  for (const auto& t : c.table())
    if (t.optimizer().delay_compensation() > 0)
      return FieldError("table[" + t.name() + "].optimizer.delay_compensation",
                        "corrects pushed gradients on the servers; under consistency.model AVERAGE the servers "
                        "merge model deltas: drop it");
  // A schedule is the servers' factor on a pushed gradient's step; under
  // AVERAGE the steps are the local replicas', which take none.
  if (ScheduleActive(c.optimizer().schedule()))
    return FieldError("optimizer.schedule", "is applied by the servers to pushed gradients; under consistency.model "
                                           "AVERAGE the workers' replicas take the steps: drop the schedule");
  for (const auto& t : c.table())
    if (ScheduleActive(t.optimizer().schedule()))
      return FieldError("table[" + t.name() + "].optimizer.schedule",
                        "is applied by the servers to pushed gradients; under consistency.model AVERAGE the "
                        "workers' replicas take the steps: drop the schedule");
  return Status::OK();
}

// cluster.replicas: a shard's copies live on the server processes of the
// next shards, so each needs a process of its own; each process runs a
// thread per copy it holds (server/replica_host.h), hence a bound; and a
// copy in the same process as its primary (an in-process job, inproc://
// endpoints) would die with it.
constexpr int kMaxReplicas = 8;

Status ValidateReplicas(const ClusterConfig& c) {
  const int replicas = c.replicas();
  if (replicas == 0) return Status::OK();
  if (replicas < 0)
    return FieldError("cluster.replicas", "must be ≥ 0 (0: no replicas), got " + std::to_string(replicas));
  if (replicas >= c.num_servers())
    return FieldError("cluster.replicas", "is " + std::to_string(replicas) + ", but must be < cluster.num_servers = " +
                                              std::to_string(c.num_servers()) +
                                              ": each copy of a shard lives on another server process");
  if (replicas > kMaxReplicas)
    return FieldError("cluster.replicas", "is " + std::to_string(replicas) + ", but a shard holds at most " +
                                              std::to_string(kMaxReplicas) +
                                              " replicas (each server process holds a copy of as many shards)");
  for (const std::string& address : c.server_addresses())
    if (address.rfind("inproc://", 0) == 0)
      return FieldError("cluster.replicas", "is " + std::to_string(replicas) + ", but cluster.server_addresses names " +
                                                address + ": " + kInProcessReplicas);
  // An idle replica acknowledges once per heartbeat interval, and its
  // primary doubts it after two silent intervals (server/replica_link.cc)
  // but drops it after cluster.liveness_timeout_ms: below two intervals a
  // healthy idle replica would be dropped as silent.
  const int64_t liveness = c.liveness_timeout_ms(), heartbeat = c.heartbeat_interval_ms();
  if (liveness != 0 && liveness < 2 * heartbeat)
    return FieldError("cluster.liveness_timeout_ms",
                      "is " + std::to_string(liveness) + " ms, below 2 × cluster.heartbeat_interval_ms (2 × " +
                          std::to_string(heartbeat) + " = " + std::to_string(2 * heartbeat) +
                          " ms): with cluster.replicas an idle replica acknowledges once per heartbeat interval and "
                          "would be dropped as silent; raise cluster.liveness_timeout_ms (--liveness_timeout_ms) to " +
                          std::to_string(2 * heartbeat) + " or more, or lower cluster.heartbeat_interval_ms");
  return Status::OK();
}

}  // namespace

Status ValidateInProcessJob(const JobConfig& c) {
  if (c.cluster().replicas() == 0) return Status::OK();
  return FieldError("cluster.replicas", "is " + std::to_string(c.cluster().replicas()) +
                                            ", but this is an in-process job (tether-launch --transport=inproc, "
                                            "tether-worker --in_process): " + kInProcessReplicas);
}

namespace {
Status ValidateValidation(const JobConfig& c);
}  // namespace

Status CheckPspConstant(double value, const std::string& where) {
  if (value > 0 && std::isfinite(value)) return Status::OK();
  std::ostringstream got;
  got << value;
  return Status::InvalidArgument(where + ": must be a finite number > 0, got " + got.str());
}

Status ValidateServerConfig(const JobConfig& c) {
  // Job ids and names reach log lines, file names and Prometheus labels.
  if (!c.name().empty())
    if (const std::string why = NameProblem(c.name()); !why.empty()) return FieldError("name", why);
  if (!c.cluster().job_id().empty())
    if (const std::string why = NameProblem(c.cluster().job_id()); !why.empty())
      return FieldError("cluster.job_id", why);
  for (const auto& t : c.table())
    if (!t.name().empty())
      if (const std::string why = NameProblem(t.name()); !why.empty()) return FieldError("table.name", why);
  if (c.cluster().num_servers() < 1) return FieldError("cluster.num_servers", "must be ≥ 1");
  if (c.cluster().num_workers() < 1) return FieldError("cluster.num_workers", "must be ≥ 1");
  TETHER_RETURN_IF_ERROR(ValidateCountBounds(c));
  TETHER_RETURN_IF_ERROR(ValidateDurations(c));
  TETHER_RETURN_IF_ERROR(ValidateReplicas(c.cluster()));
  if (c.cluster().max_workers() < 0 ||
      (c.cluster().max_workers() > 0 && c.cluster().max_workers() < c.cluster().num_workers()))
    return FieldError("cluster.max_workers", "is " + std::to_string(c.cluster().max_workers()) +
                                          ": must be ≥ cluster.num_workers = " +
                                          std::to_string(c.cluster().num_workers()) + " (or 0: num_workers)");
  if (c.cluster().server_addresses_size() != 0 &&
      c.cluster().server_addresses_size() != c.cluster().num_servers())
    return FieldError("cluster.server_addresses", "has " + std::to_string(c.cluster().server_addresses_size()) +
                                               " entries but cluster.num_servers is " +
                                               std::to_string(c.cluster().num_servers()));
  TETHER_RETURN_IF_ERROR(CheckDistinctEndpoints(
      {c.cluster().server_addresses().begin(), c.cluster().server_addresses().end()},
      "config field cluster.server_addresses"));
  if (c.consistency().staleness() < -1) return FieldError("consistency.staleness", "must be ≥ 0, or -1 (inf) for ASP");
  TETHER_RETURN_IF_ERROR(ValidateAverage(c));
  for (const auto& t : c.table()) {
    if (t.consistency().staleness() < -1)
      return FieldError("table[" + t.name() + "].consistency.staleness", "must be ≥ 0, or -1 (inf) for ASP");
    for (const char* field :
         {"cache_capacity_bytes", "cache_capacity_fraction", "memory_limit_bytes", "key_list_cache"}) {
      const google::protobuf::FieldDescriptor* f = ConsistencyConfig::descriptor()->FindFieldByName(field);
      if (t.consistency().GetReflection()->HasField(t.consistency(), f))
        return FieldError("table[" + t.name() + "].consistency." + field,
                   "is job-wide (one cache and one process for all tables): set it in the job's consistency "
                   "section");
    }
  }
  const double fraction = c.consistency().cache_capacity_fraction();
  if (!(fraction >= 0 && fraction <= 1))
    return FieldError("consistency.cache_capacity_fraction", "must be in (0, 1], or 0 (not set)");
  if (fraction > 0 && c.consistency().cache_capacity_bytes() > 0)
    return FieldError("consistency.cache_capacity_fraction",
               "and consistency.cache_capacity_bytes are both set: give one (the flag --cache_capacity sets "
               "either and clears the other)");
  if (c.cluster().heartbeat_interval_ms() < 1) return FieldError("cluster.heartbeat_interval_ms", "must be ≥ 1");
  if (c.cluster().worker_timeout_ms() <= c.cluster().heartbeat_interval_ms())
    return FieldError("cluster.worker_timeout_ms", "must exceed cluster.heartbeat_interval_ms (" +
                                                std::to_string(c.cluster().heartbeat_interval_ms()) + ")");
  // Below ~100 ms a reconnect after a transient drop (ZeroMQ retries every
  // 100 ms) could not come back in time.
  if (c.cluster().liveness_timeout_ms() != 0 && c.cluster().liveness_timeout_ms() < 100)
    return FieldError("cluster.liveness_timeout_ms", "must be ≥ 100, or 0 (off)");
  // A waiting worker's heartbeats are what keeps a server from its idle
  // timeout.
  if (c.cluster().idle_timeout_ms() <= c.cluster().heartbeat_interval_ms())
    return FieldError("cluster.idle_timeout_ms", "must exceed cluster.heartbeat_interval_ms (" +
                                                 std::to_string(c.cluster().heartbeat_interval_ms()) + ")");
  // The validation split and early stopping: a server refuses what its
  // workers would (a metric the model does not report), with the same
  // message, before any worker reaches it.
  return ValidateValidation(c);
}

namespace {

// The data section: format, index base, the training file, file lists and
// streaming.
Status ValidateData(const JobConfig& c) {
  if (c.data().format() == ARFF) {
    if (c.data().index_base() != -1 && c.data().index_base() != 0)
      return FieldError("data.index_base", "must be unset or 0 with data.format ARFF (ARFF attribute indices are 0-based)");
    if (c.data().label_xml().empty() && c.data().num_labels() <= 0)
      return FieldError("data.label_xml", "is required with data.format ARFF unless data.num_labels is set (then the last "
                                   "num_labels attributes are the labels)");
  } else if (c.data().index_base() != 0 && c.data().index_base() != 1) {
    return FieldError("data.index_base", "must be set to 0 or 1 (it is never guessed from the data)");
  }
  if (!c.data().label_xml().empty() && c.data().format() != ARFF)
    return FieldError("data.label_xml", "applies to data.format ARFF only");
  if (c.data().train_file().empty()) return FieldError("data.train_file", "is required");
  // Many files and streaming (core/data_files.h, input/row_stream.h).
  if (c.data().shuffle_buffer_rows() < 1) return FieldError("data.shuffle_buffer_rows", "must be ≥ 1");
  for (const auto& [field, value] : {std::pair<const char*, const std::string*>{"data.train_file", &c.data().train_file()},
                                     {"data.test_file", &c.data().test_file()}}) {
    if (!IsFileList(*value) && !(c.data().streaming() && field == std::string("data.train_file"))) continue;
    const std::string why = IsFileList(*value) ? "names several files" : "is streamed (data.streaming)";
    if (c.data().format() != XMC && c.data().format() != LIBSVM)
      return FieldError(field, why + ", which XMC and LIBSVM files support, not data.format " +
                            FileFormat_Name(c.data().format()));
    const std::string& split = field == std::string("data.train_file") ? c.data().train_split() : c.data().test_split();
    if (!split.empty())
      return FieldError(field, why + ", so its rows have no single numbering for a split file (" + field +
                            " with " + (field == std::string("data.train_file") ? "data.train_split" : "data.test_split") +
                            "): list the split's rows as files instead");
  }
  if (IsFileList(c.data().train_file()) && !c.data().validation_split().empty())
    return FieldError("data.validation_split", "needs one numbering of the training rows, but data.train_file names "
                                               "several files: set train.validation_fraction instead");
  return Status::OK();
}

// The checkpoint section, and what data settings it cannot be combined with.
Status ValidateCheckpoint(const JobConfig& c) {
  if (c.data().streaming() && !c.checkpoint().dir().empty())
    return FieldError("checkpoint.dir", "is set but data.streaming is true: a streamed epoch has no row list to record "
                                 "(and with train.data_on_demand the dealing state numbers rows in memory), so a "
                                 "checkpoint could not be resumed; train in memory (data.streaming: false) to "
                                 "checkpoint");
  if (IsFileList(c.data().train_file()) && !c.checkpoint().dir().empty())
    return FieldError("checkpoint.dir", "is set but data.train_file names several files, whose rows a checkpoint cannot "
                                 "number yet; concatenate them into one file to checkpoint");
  if (c.checkpoint().every_clocks() < 0) return FieldError("checkpoint.every_clocks", "must be ≥ 0 (0: not by clocks)");
  if (c.checkpoint().every_seconds() < 0) return FieldError("checkpoint.every_seconds", "must be ≥ 0 (0: not by time)");
  if (c.checkpoint().keep_last() < 1) return FieldError("checkpoint.keep_last", "must be ≥ 1");
  if (c.checkpoint().dir().empty() && (c.checkpoint().every_clocks() > 0 || c.checkpoint().every_seconds() > 0))
    return FieldError("checkpoint.dir", "is empty, so checkpoint.every_clocks / every_seconds would write nothing: set "
                                 "checkpoint.dir (--checkpoint_dir)");
  if (c.checkpoint().dir().empty() && c.checkpoint().has_keep_last())
    return FieldError("checkpoint.keep_last", "is set but checkpoint.dir is empty, so no checkpoint is written to "
                                              "keep: set checkpoint.dir (--checkpoint_dir), or drop keep_last");
  return Status::OK();
}

// The input's width and values: hashed features, IDX labels, scale and offset.
Status ValidateFeatures(const JobConfig& c) {
  if (c.data().hashed_features()) {
    // Refused, not ignored: a declared width would promise a bound that no
    // id is checked against.
    if (c.data().format() == IDX || c.data().format() == ARFF)
      return FieldError("data.hashed_features",
                 std::string("applies to XMC and LIBSVM text; data.format ") +
                     (c.data().format() == IDX ? "IDX is dense pixels" : "ARFF declares its columns") +
                     ", not 64-bit feature ids");
    if (c.data().num_features() != 0)
      return FieldError("data.num_features", "must be 0 (unset) with data.hashed_features: true: feature ids are any "
                                      "64-bit integer and the model has no input width; got " +
                                          std::to_string(c.data().num_features()));
  } else if (c.data().num_features() <= 0) {
    return FieldError("data.num_features", "must be > 0 (the model's input width)");
  }
  // What the labels and widths must look like depends on the model: the
  // model registry checks those (ValidateModelConfig, worker/models/model_registry.h).
  if (c.data().format() == IDX) {
    if (c.data().train_label_file().empty()) return FieldError("data.train_label_file", "is required with data.format IDX");
    if (!c.data().test_file().empty() && c.data().test_label_file().empty())
      return FieldError("data.test_label_file", "is required with data.format IDX when data.test_file is set");
  }
  if (!(c.data().feature_scale() > 0) || !std::isfinite(c.data().feature_scale()))
    return FieldError("data.feature_scale", "must be a finite number > 0");
  if (!std::isfinite(c.data().feature_offset()))
    return FieldError("data.feature_offset", "must be a finite number");
  if (c.data().feature_offset() != 0 && c.model().type() != DENSE_MLP && c.model().name().empty())
    return FieldError("data.feature_offset", "applies to dense input only (model.type DENSE_MLP); a sparse model "
                                      "would lose its sparsity");
  return Status::OK();
}

// Dropout and label smoothing: in range, and only where a model reads them
// (the built-in XMC_MLP without sampled labels, and DENSE_MLP).
Status ValidateRegularization(const JobConfig& c) {
  for (const auto& [field, value] : {std::pair<const char*, float>{"model.dropout", c.model().dropout()},
                                     {"model.label_smoothing", c.model().label_smoothing()}}) {
    if (!(value >= 0.0f && value < 1.0f)) return FieldError(field, "must be in [0, 1)");
    if (value == 0.0f) continue;
    const bool named = !c.model().name().empty() && c.model().name() != "xmc_mlp" && c.model().name() != "dense_mlp";
    if (named || c.model().type() == SPARSE_LR)
      return FieldError(field, std::string("is read by the XMC_MLP and DENSE_MLP models only, not ") +
                                   (named ? "model '" + c.model().name() + "'" : std::string("SPARSE_LR")));
    if (c.model().type() == XMC_MLP && c.model().sampled_labels() > 0)
      return FieldError(field, "is not read with model.sampled_labels > 0 (the sampled softmax)");
  }
  return Status::OK();
}

// Input dropout: in range, and only where a model reads it (the built-in
// XMC_MLP without sampled labels).
Status ValidateInputDropout(const JobConfig& c) {
  const float rate = c.model().input_dropout();
  if (!(rate >= 0.0f && rate < 1.0f)) return FieldError("model.input_dropout", "must be in [0, 1)");
  if (rate == 0.0f) return Status::OK();
  const std::string& name = c.model().name();
  if (!name.empty() && name != "xmc_mlp")
    return FieldError("model.input_dropout", "is read by the XMC_MLP model only, not model '" + name + "'");
  if (name.empty() && c.model().type() != XMC_MLP)
    return FieldError("model.input_dropout", std::string("is read by the XMC_MLP model only, not ") +
                                                 ModelType_Name(c.model().type()));
  if (c.model().sampled_labels() > 0)
    return FieldError("model.input_dropout", "is not read with model.sampled_labels > 0 (the sampled softmax)");
  return Status::OK();
}

// model.hidden where no hidden layer reads it: SPARSE_LR has none, and
// DENSE_MLP takes its widths from model.hidden_layers when that is set; a
// width set there (a --hidden flag) would change nothing.
Status ValidateHiddenWidth(const JobConfig& c) {
  if (c.model().hidden() < 1) return FieldError("model.hidden", "must be ≥ 1");
  const std::string& name = c.model().name();
  const bool sparse_lr = name.empty() ? c.model().type() == SPARSE_LR : name == "sparse_lr";
  if (sparse_lr && c.model().has_hidden())
    return FieldError("model.hidden", "is not read by SPARSE_LR, a linear model without a hidden layer");
  const bool dense_mlp = name.empty() ? c.model().type() == DENSE_MLP : name == "dense_mlp";
  if (!dense_mlp || !c.model().has_hidden() || c.model().hidden_layers_size() == 0) return Status::OK();
  std::string widths;
  for (int w : c.model().hidden_layers()) widths += (widths.empty() ? "" : ", ") + std::to_string(w);
  return FieldError("model.hidden", "is not read by DENSE_MLP when model.hidden_layers is set (" + widths +
                                        "): set the hidden widths in model.hidden_layers");
}

// model.loss BCE and model.sampled_labels shape the XMC model's output
// layer only: DENSE_MLP trains a softmax over its classes and SPARSE_LR the
// logistic loss whatever they say.
Status ValidateXmcOutputFields(const JobConfig& c) {
  const std::string& name = c.model().name();
  const bool other = name.empty() ? c.model().type() != XMC_MLP : name == "dense_mlp" || name == "sparse_lr";
  if (!other) return Status::OK();
  const std::string model = name.empty() ? ModelType_Name(c.model().type()) : "model '" + name + "'";
  if (c.model().loss() == BCE)
    return FieldError("model.loss", "BCE is read by the XMC_MLP model only, not " + model +
                                        " (DENSE_MLP trains a softmax over its classes, SPARSE_LR the logistic loss)");
  if (c.model().sampled_labels() != 0)
    return FieldError("model.sampled_labels", "is read by the XMC_MLP model only, not " + model);
  return Status::OK();
}

// The model's width and init, and the training loop's counts and straggler.
Status ValidateModelAndTrain(const JobConfig& c) {
  TETHER_RETURN_IF_ERROR(ValidateRegularization(c));
  TETHER_RETURN_IF_ERROR(ValidateInputDropout(c));
  TETHER_RETURN_IF_ERROR(ValidateHiddenWidth(c));
  TETHER_RETURN_IF_ERROR(ValidateXmcOutputFields(c));
  if (!(c.model().init_scale() >= 0) || !std::isfinite(c.model().init_scale()))
    return FieldError("model.init_scale", "must be a finite number ≥ 0");
  if (c.train().epochs() < 1) return FieldError("train.epochs", "must be ≥ 1");
  if (c.train().minibatch_size() < 1) return FieldError("train.minibatch_size", "must be ≥ 1");
  if (c.train().minibatches_per_clock() < 1) return FieldError("train.minibatches_per_clock", "must be ≥ 1");
  if (c.train().threads() < 1) return FieldError("train.threads", "must be ≥ 1");
  if (!(c.train().slowdown() >= 1.0f) || !std::isfinite(c.train().slowdown()))
    return FieldError("train.slowdown", "must be a finite factor ≥ 1");
  if (c.train().slowdown() > 1.0f &&
      (c.train().slowdown_rank() < 0 || c.train().slowdown_rank() >= c.cluster().num_workers()))
    return FieldError("train.slowdown_rank", "must name a worker in [0, cluster.num_workers = " +
                                          std::to_string(c.cluster().num_workers()) + ")");
  return Status::OK();
}

// train.adaptive_batch, against the mean batch train.minibatch_size.
Status ValidateAdaptiveBatch(const JobConfig& c) {
  const AdaptiveBatchConfig& ab = c.train().adaptive_batch();
  const AdaptiveBatchConfig r = ResolvedAdaptiveBatch(c.train());
  const std::string mb = "train.minibatch_size (" + std::to_string(c.train().minibatch_size()) + ")";
  if (ab.b_min() < 0) return FieldError("train.adaptive_batch.b_min", "must be ≥ 1, or 0 (minibatch_size / 4)");
  if (ab.b_max() < 0) return FieldError("train.adaptive_batch.b_max", "must be ≥ 1, or 0 (4 × minibatch_size)");
  if (r.b_min() > c.train().minibatch_size())
    return FieldError("train.adaptive_batch.b_min", std::to_string(r.b_min()) + " is above " + mb +
                                                 ", the mean batch the workers keep");
  if (r.b_max() < c.train().minibatch_size())
    return FieldError("train.adaptive_batch.b_max", std::to_string(r.b_max()) + " is below " + mb +
                                                 ", the mean batch the workers keep");
  if (ab.warmup_clocks() < 0) return FieldError("train.adaptive_batch.warmup_clocks", "must be ≥ 0");
  if (ab.window_clocks() < 1) return FieldError("train.adaptive_batch.window_clocks", "must be ≥ 1");
  if (!(ab.smoothing() > 0 && ab.smoothing() <= 1))
    return FieldError("train.adaptive_batch.smoothing", "must be in (0, 1] (1: move to the new size at once)");
  return Status::OK();
}

// Evaluation and chunk sizes, divergence, PSP constants and the device.
Status ValidateTrainLimits(const JobConfig& c) {
  if (c.train().eval_minibatch_size() < 1) return FieldError("train.eval_minibatch_size", "must be ≥ 1");
  if (c.train().progress_every_s() < 0)
    return FieldError("train.progress_every_s", "must be ≥ 0 seconds (0: no progress lines), got " +
                                                std::to_string(c.train().progress_every_s()));
  if (c.train().eval_max_rows() < 0)
    return FieldError("train.eval_max_rows", "must be ≥ 0 (0: every test row), got " +
                                             std::to_string(c.train().eval_max_rows()));
  if (c.train().eval_every_epochs() < 0)
    return FieldError("train.eval_every_epochs", "must be ≥ 0 (0: at the end only), got " +
                                                 std::to_string(c.train().eval_every_epochs()));
  if (c.train().chunk_rows() < 0)
    return FieldError("train.chunk_rows", "must be ≥ 0 (0: 4 x train.minibatch_size), got " +
                                       std::to_string(c.train().chunk_rows()));
  if (c.train().chunk_bytes() < 0)
    return FieldError("train.chunk_bytes", "must be ≥ 0 (0: train.chunk_rows x the mean bytes per row of the first "
                                    "training file), got " + std::to_string(c.train().chunk_bytes()));
  if (!(c.train().divergence_factor() > 1) || !std::isfinite(c.train().divergence_factor()))
    return FieldError("train.divergence_factor", "must be a finite number > 1");
  TETHER_RETURN_IF_ERROR(CheckPspConstant(c.train().psp_a(), "config field train.psp_a"));
  TETHER_RETURN_IF_ERROR(CheckPspConstant(c.train().psp_b(), "config field train.psp_b"));
  // PSP@k is a metric of multi-label models: SPARSE_LR reports binary and
  // DENSE_MLP multiclass metrics, which no propensity weighs.
  const std::string& name = c.model().name();
  const bool single_label = name.empty() ? c.model().type() != XMC_MLP : name == "sparse_lr" || name == "dense_mlp";
  if (single_label && (c.train().has_psp_a() || c.train().has_psp_b()))
    return FieldError(c.train().has_psp_a() ? "train.psp_a" : "train.psp_b",
                      "weighs the PSP@k metrics of multi-label models (XMC_MLP) only, not " +
                          (name.empty() ? ModelType_Name(c.model().type()) : "model '" + name + "'") +
                          ", whose metrics are accuracy and log_loss");
  const std::string& dev = c.train().device();
  if (dev != "auto" && dev != "cpu" && dev != "cuda") return FieldError("train.device", "must be auto, cpu or cuda, got '" + dev + "'");
  return Status::OK();
}

// TF-IDF weighting (data.tf_idf): the workers sum dense per-feature
// document counts in round 0 of the partitioned evaluation, so the input
// needs a fixed width small enough for one count vector per worker in a
// message, and rows held in memory to count and weigh.
Status ValidateTfIdf(const JobConfig& c) {
  if (!c.data().tf_idf()) return Status::OK();
  const auto refused = [](const std::string& why) { return FieldError("data.tf_idf", why); };
  if (c.data().format() == IDX)
    return refused("applies to sparse text input (data.format XMC, LIBSVM or ARFF), not IDX images");
  if (c.data().hashed_features())
    return refused("needs a fixed input width: the document counts are one dense vector of data.num_features "
                   "entries, which data.hashed_features does not have");
  if (c.data().streaming())
    return refused("counts and weighs rows held in memory: not with data.streaming");
  if (c.data().num_features() > kMaxTfIdfFeatures)
    return refused("needs data.num_features <= " + std::to_string(kMaxTfIdfFeatures) +
                   " (every worker sends one dense document count per feature), got " +
                   std::to_string(c.data().num_features()));
  return Status::OK();
}

// The validation split (train.validation_fraction, or data.validation_split)
// and early stopping on it: rows carved from each worker's partition in
// memory, evaluated after every epoch; the test split read only at the end.
Status ValidateValidation(const JobConfig& c) {
  const TrainConfig& t = c.train();
  const double f = t.validation_fraction();
  if (!(f >= 0 && f < 1)) return FieldError("train.validation_fraction", "must be in [0, 1)");
  if (f > 0 && c.data().has_validation_split())
    return FieldError("data.validation_split", "and train.validation_fraction exclude each other (the rows a file "
                                               "names, or the rows a hash chooses): set one of the two");
  if (!HasValidationSplit(c)) {
    const std::string why = "needs a validation split: set train.validation_fraction or data.validation_split";
    if (t.has_early_stopping()) return FieldError("train.early_stopping", why);
    if (t.has_keep_best_model() && t.keep_best_model()) return FieldError("train.keep_best_model", why);
    return Status::OK();
  }
  const std::string field = ValidationSplitField(c);
  const auto refused = [&](const std::string& why) { return FieldError(field, why); };
  if (c.data().streaming())
    return refused("needs the training rows in memory: not with data.streaming");
  if (t.data_on_demand())
    return refused("needs each worker's own partition: not with train.data_on_demand");
  // Every worker waits on each validation round; a rank joining beyond the
  // initial ones could ask after the round was handed out.
  if (c.cluster().max_workers() > c.cluster().num_workers())
    return refused("is evaluated by the initial workers only: not with cluster.max_workers above num_workers");
  if (t.eval_every_epochs() > 0)
    return refused("reads the test split only at the end: drop train.eval_every_epochs (the validation split is "
                   "evaluated after every epoch)");
  if (t.eval_max_rows() > 0)
    return refused("reads the test split only at the end, whole: drop train.eval_max_rows");
  const EarlyStopping& es = t.early_stopping();
  if (es.patience() < 0) return FieldError("train.early_stopping.patience", "must be ≥ 0 (0: never stops early)");
  if (!(es.min_delta() >= 0) || !std::isfinite(es.min_delta()))
    return FieldError("train.early_stopping.min_delta", "must be a finite number ≥ 0");
  // A model registered by name has its kind in the model registry: the
  // worker checks its metric at start-up.
  if (const std::string kind = BuiltinLabelKindName(c); es.has_metric() && !kind.empty())
    if (const std::string problem = ValidationMetricProblem(es.metric(), kind); !problem.empty())
      return FieldError("train.early_stopping.metric", "'" + es.metric() + "' " + problem);
  return Status::OK();
}

Status ValidateOptimizers(const JobConfig& c) {
  // The same checks as a server runs on the table specs at HELLO (C22).
  auto check_opt = [&](const OptimizerConfig& o, const std::string& where) -> Status {
    std::string why;
    const std::string field = OptimizerProblem(o, &why);
    if (!field.empty()) return FieldError(where + "." + field, why);
    return Status::OK();
  };
  TETHER_RETURN_IF_ERROR(check_opt(c.optimizer(), "optimizer"));
  for (const auto& t : c.table()) {
    if (t.name().empty()) return FieldError("table.name", "is required in every table { } section");
    TETHER_RETURN_IF_ERROR(check_opt(t.optimizer(), "table[" + t.name() + "].optimizer"));
  }
  return Status::OK();
}

// Each table { } section's budget fields: set ones in range, then the rules
// a server checks at HELLO (TableBudgetProblem; row or dense is the
// model's, checked there).
Status ValidateTableBudgets(const JobConfig& c) {
  for (const auto& t : c.table()) {
    const std::string where = "table[" + t.name() + "].";
    if (t.has_admit_after() && t.admit_after() < 1)
      return FieldError(where + "admit_after", "must be ≥ 1 (a key gets a row at its K-th push), got 0");
    if (t.has_max_rows() && t.max_rows() < 1) return FieldError(where + "max_rows", "must be ≥ 1, got 0");
    std::string why;
    const std::string field = TableBudgetProblem(BudgetForTable(c, t.name()), /*row_table=*/true, &why);
    if (!field.empty()) return FieldError(where + field, why);
    // The best epoch's copy (server/kept_model.h) holds rows by row number;
    // eviction renumbers rows.
    if (t.has_evict() && t.evict() != EVICT_NONE && HasValidationSplit(c) && c.train().keep_best_model())
      return FieldError("train.keep_best_model", "cannot keep the best epoch's copy of table '" + t.name() +
                                                     "', which evicts rows; set train.keep_best_model: false");
  }
  // A shard budget makes the row tables evict (optim/shard_budget.h).
  if (c.cluster().server_memory_bytes() > 0 && HasValidationSplit(c) && c.train().keep_best_model())
    return FieldError("train.keep_best_model",
                      "cannot keep the best epoch's copy with cluster.server_memory_bytes (--server_memory), whose "
                      "row tables evict rows; set train.keep_best_model: false");
  return Status::OK();
}

}  // namespace

Status ValidateJobConfig(const JobConfig& c) {
  // The sections a server reads come first, as a server checks them alone;
  // then each section in turn, the first problem reported.
  TETHER_RETURN_IF_ERROR(ValidateServerConfig(c));
  for (Status (*check)(const JobConfig&) :
       {ValidateData, ValidateCheckpoint, ValidateFeatures, ValidateTfIdf, ValidateModelAndTrain, ValidateAdaptiveBatch,
        ValidateTrainLimits, ValidateOptimizers, ValidateTableBudgets})
    TETHER_RETURN_IF_ERROR(check(c));
  return Status::OK();
}

Status CheckDataFilesExist(const JobConfig& config) {
  const DataConfig& d = config.data();
  const std::pair<const char*, const std::string*> files[] = {
      {"train_file", &d.train_file()},         {"test_file", &d.test_file()},
      {"train_split", &d.train_split()},       {"test_split", &d.test_split()},
      {"validation_split", &d.validation_split()},
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

}  // namespace tether
