#include "worker/metrics_json.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include "core/config.h"
#include "worker/train/job_outcome.h"

namespace tether {
namespace {

using google::protobuf::FieldDescriptor;

// One value of field `f` of `m` (element `i` of a repeated field), as the
// JSON type its proto type maps to: every integer type stays a JSON integer,
// float and double a JSON float.
nlohmann::json FieldValue(const google::protobuf::Message& m, const FieldDescriptor* f, int i) {
  const google::protobuf::Reflection* r = m.GetReflection();
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: return rep ? r->GetRepeatedInt32(m, f, i) : r->GetInt32(m, f);
    case FieldDescriptor::CPPTYPE_INT64: return rep ? r->GetRepeatedInt64(m, f, i) : r->GetInt64(m, f);
    case FieldDescriptor::CPPTYPE_UINT32: return rep ? r->GetRepeatedUInt32(m, f, i) : r->GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64: return rep ? r->GetRepeatedUInt64(m, f, i) : r->GetUInt64(m, f);
    case FieldDescriptor::CPPTYPE_DOUBLE: return rep ? r->GetRepeatedDouble(m, f, i) : r->GetDouble(m, f);
    case FieldDescriptor::CPPTYPE_FLOAT: return rep ? r->GetRepeatedFloat(m, f, i) : r->GetFloat(m, f);
    case FieldDescriptor::CPPTYPE_BOOL: return rep ? r->GetRepeatedBool(m, f, i) : r->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_STRING: return rep ? r->GetRepeatedString(m, f, i) : r->GetString(m, f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return (rep ? r->GetRepeatedEnum(m, f, i) : r->GetEnum(m, f))->name();
    case FieldDescriptor::CPPTYPE_MESSAGE: break;
  }
  return nullptr;
}

// Every scalar and repeated scalar field of `m` but those in `skip`, under
// its proto name, set or not (so the keys do not depend on the values). A
// singular message field's own fields are written the same way, flattened
// under "<field>_<name>" (WorkerStats.key_lists.used → "key_lists_used"),
// so users' scripts read flat objects. Repeated message fields are left to
// the caller.
void AddScalarFields(const google::protobuf::Message& m, const std::vector<std::string>& skip,
                     const std::string& prefix, nlohmann::json* out) {
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  nlohmann::json& j = *out;
  for (int k = 0; k < d->field_count(); ++k) {
    const FieldDescriptor* f = d->field(k);
    if (std::find(skip.begin(), skip.end(), f->name()) != skip.end()) continue;
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      // An unset message reads as its defaults: the keys stay the same.
      if (!f->is_repeated())
        AddScalarFields(m.GetReflection()->GetMessage(m, f), {}, prefix + f->name() + "_", out);
      continue;
    }
    if (!f->is_repeated()) {
      j[prefix + f->name()] = FieldValue(m, f, 0);
      continue;
    }
    nlohmann::json values = nlohmann::json::array();
    const int n = m.GetReflection()->FieldSize(m, f);
    for (int i = 0; i < n; ++i) values.push_back(FieldValue(m, f, i));
    j[prefix + f->name()] = std::move(values);
  }
}

nlohmann::json ScalarFieldsJson(const google::protobuf::Message& m, const std::vector<std::string>& skip = {}) {
  nlohmann::json j = nlohmann::json::object();
  AddScalarFields(m, skip, "", &j);
  return j;
}

double StalenessMean(uint64_t tau_sum, uint64_t pushes) {
  return pushes ? static_cast<double>(tau_sum) / pushes : 0.0;
}

// A worker's "wire": per table name, its WorkerTableWire fields and the
// compression ratio of each direction (bytes in float32 over bytes sent).
nlohmann::json WireJson(const WorkerStats& w) {
  nlohmann::json out = nlohmann::json::object();
  const auto ratio = [](uint64_t bytes, uint64_t values, uint64_t fp32) {
    return bytes == 0 ? 1.0 : static_cast<double>(bytes - values + fp32) / static_cast<double>(bytes);
  };
  for (const WorkerTableWire& t : w.wire()) {
    nlohmann::json j = ScalarFieldsJson(t, {"table"});
    j["sent_ratio"] = ratio(t.sent_bytes(), t.sent_value_bytes(), t.sent_fp32_value_bytes());
    j["received_ratio"] = ratio(t.received_bytes(), t.received_value_bytes(), t.received_fp32_value_bytes());
    out[t.table()] = std::move(j);
  }
  return out;
}

// Adds the "workers", "servers" and job-wide staleness keys (see MetricsJson).
void AddServerStats(const std::vector<ShardStats>& shards, nlohmann::json* j) {
  nlohmann::json workers = nlohmann::json::array();
  const int num_ranks = shards.empty() ? 0 : shards[0].workers_size();
  for (int r = 0; r < num_ranks; ++r) {
    const WorkerStats& w = shards[0].workers(r);
    nlohmann::json wj = w.has_rank() ? ScalarFieldsJson(w, {"train_start_unix_s", "train_end_unix_s", "run_samples", "diverged_at_epoch"})
                                     : nlohmann::json::object();
    double bound_wait = 0;
    for (const ShardStats& s : shards)
      if (r < s.bound_wait_seconds_size()) bound_wait = std::max(bound_wait, s.bound_wait_seconds(r));
    wj["bound_wait_seconds"] = bound_wait;
    wj["bound_wait_fraction"] = w.train_seconds() > 0 ? std::min(1.0, bound_wait / w.train_seconds()) : 0.0;
    // Rows per minibatch over the run (adaptive batch sizes move it).
    if (w.has_rank()) {
      wj["batch_size_mean"] = w.minibatches() > 0 ? static_cast<double>(w.samples()) / w.minibatches() : 0.0;
      wj["wire"] = WireJson(w);
    }
    workers.push_back(std::move(wj));
  }
  (*j)["workers"] = std::move(workers);

  nlohmann::json servers = nlohmann::json::array();
  uint64_t pushes = 0, tau_sum = 0, tau_max = 0, violations = 0, chunks_redealt = 0, rows_redealt = 0;
  ShardKeyListStats key_lists;  // summed over the shards
  std::vector<uint64_t> histogram;
  for (const ShardStats& s : shards) {
    nlohmann::json sj = ScalarFieldsJson(s, {"staleness_sum", "send_failures"});
    sj["staleness_mean"] = StalenessMean(s.staleness_sum(), s.pushes());
    servers.push_back(std::move(sj));
    pushes += s.pushes();
    tau_sum += s.staleness_sum();
    tau_max = std::max(tau_max, s.staleness_max());
    violations += s.bound_violations();
    chunks_redealt += s.chunks_redealt();
    rows_redealt += s.rows_redealt();
    key_lists.set_defined(key_lists.defined() + s.key_lists().defined());
    key_lists.set_used(key_lists.used() + s.key_lists().used());
    key_lists.set_unknown(key_lists.unknown() + s.key_lists().unknown());
    key_lists.set_bytes_saved(key_lists.bytes_saved() + s.key_lists().bytes_saved());
    if (histogram.size() < static_cast<size_t>(s.staleness_histogram_size()))
      histogram.resize(s.staleness_histogram_size());
    for (int i = 0; i < s.staleness_histogram_size(); ++i) histogram[i] += s.staleness_histogram(i);
  }
  (*j)["servers"] = std::move(servers);
  (*j)["staleness_mean"] = StalenessMean(tau_sum, pushes);
  (*j)["staleness_max"] = tau_max;
  (*j)["staleness_histogram"] = histogram;
  (*j)["bound_violations"] = violations;
  // Data on demand (train.data_on_demand): chunks dealt again after their
  // holder left or was declared gone, and their rows, job-wide.
  (*j)["chunks_redealt"] = chunks_redealt;
  (*j)["rows_redealt"] = rows_redealt;
  // Key-list caching, job-wide: the shards' counts summed (they include the
  // requests of workers that left before the barrier).
  AddScalarFields(key_lists, {}, "key_lists_", j);
}

}  // namespace

double JobSamplesPerSecond(const TrainReport& r) {
  if (r.servers.empty() || r.servers[0].workers_size() == 0) return r.samples_per_second;
  double first_start = 0, last_end = 0;
  // The rows trained in this run (a resumed job's total_samples also holds
  // those before its checkpoint, which the span does not cover).
  uint64_t run_samples = 0;
  bool every_run = true;
  for (int i = 0; i < r.servers[0].workers_size(); ++i) {
    const WorkerStats& w = r.servers[0].workers(i);
    if (!w.has_rank() || !w.has_train_start_unix_s() || !w.has_train_end_unix_s()) return r.samples_per_second;
    first_start = i == 0 ? w.train_start_unix_s() : std::min(first_start, w.train_start_unix_s());
    last_end = i == 0 ? w.train_end_unix_s() : std::max(last_end, w.train_end_unix_s());
    every_run = every_run && w.has_run_samples();
    run_samples += w.run_samples();
  }
  const double span_s = last_end - first_start;
  const uint64_t samples = every_run ? run_samples : r.total_samples;
  return span_s > 0 ? static_cast<double>(samples) / span_s : r.samples_per_second;
}

nlohmann::json MetricsJson(const TrainReport& r, const JobConfig& config) {
  nlohmann::json j = nlohmann::json::object();
  // JSON has no NaN (an undefined AUC: one class only): write null.
  for (const auto& [name, value] : r.test_metrics) j[name] = std::isfinite(value) ? nlohmann::json(value) : nullptr;
  j["train_seconds"] = r.train_seconds;
  j["samples_per_second"] = JobSamplesPerSecond(r);
  j["total_samples"] = r.total_samples;
  j["test_rows"] = r.test_rows;
  // Partitioned evaluation: the exact counts behind the metrics, and who
  // evaluated in how long.
  for (const auto& [name, value] : r.eval_counts) j[name] = value;
  j["eval_workers"] = r.eval_workers;
  j["eval_parts_for_others"] = r.eval_parts_for_others;
  j["eval_seconds"] = r.eval_seconds;
  j["eval_seconds_slowest_worker"] = r.eval_seconds_slowest;
  // JSON has no NaN: a non-finite loss (diverged) is written as null.
  j["final_loss"] = std::isfinite(r.final_loss) ? nlohmann::json(r.final_loss) : nullptr;
  j["final_loss_from"] = r.final_loss_from;
  // Only in the metrics of a job that failed (the run exits non-zero).
  if (!r.failure.empty()) j["failure"] = r.failure;
  // Any worker's divergence is the job's (its BARRIER said so), not only
  // the evaluator's own.
  const JobDivergence d =
      JudgeJobDivergence(r.servers.empty() ? nullptr : &r.servers[0], r.diverged ? r.diverged_at_epoch : 0);
  j["diverged"] = d.diverged;
  j["diverged_at_epoch"] = d.at_epoch;
  if (!d.ranks.empty()) j["diverged_workers"] = d.ranks;
  // Only where the user accepted a run that fell short (a diverged loss,
  // a partial evaluation): what was accepted.
  RunVerdict verdict = JudgeReport(r, config);
  if (d.diverged && !r.diverged && !config.train().fail_on_divergence())
    verdict.accepted.insert(verdict.accepted.begin(), "diverged");
  if (!verdict.accepted.empty()) j["accepted"] = verdict.accepted;
  j["pull_wait_fraction_rank0"] = r.pull_wait_fraction;
  j["num_workers"] = config.cluster().num_workers();
  j["num_servers"] = config.cluster().num_servers();
  j["staleness"] = EffectiveStaleness(config.consistency());
  j["epochs"] = config.train().epochs();
  j["seed"] = config.train().seed();
  if (r.validation_rows > 0) {
    // The validation split's own keys; precision_at_* and the others above
    // stay the test split's.
    for (const auto& [name, value] : r.validation_metrics)
      j["validation_" + name] = std::isfinite(value) ? nlohmann::json(value) : nullptr;
    j["validation_rows"] = r.validation_rows;
    j["validation_metric"] = r.validation_metric;
    j["best_epoch"] = r.best_epoch;
    j["epochs_trained"] = r.epochs_trained;
    j["scored_epoch"] = r.scored_epoch;
    j["stopped_early"] = r.stopped_early;
  }
  if (!r.servers.empty()) AddServerStats(r.servers, &j);
  return j;
}

}  // namespace tether
