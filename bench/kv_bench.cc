#include "bench/kv_bench.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "bench/random_keys.h"
#include "core/net/curve.h"
#include "core/wire_codec.h"
#include "worker/client/client.h"
#include "worker/client/job_session.h"

namespace tether {
namespace {

// The client of the job: one ROW table per distinct dim of `shapes`, in
// first-seen order (*dims lists them), and the connection settings. False
// (after a line on stderr) for bad CURVE keys.
bool KvClientOptions(const KvBenchOptions& options, OptimizerType type, WireEncoding wire,
                     const std::vector<std::pair<int64_t, int64_t>>& shapes, ClientOptions* copts,
                     std::vector<int64_t>* dims) {
  copts->servers = {options.server};
  copts->staleness = -1;
  copts->job_id = options.job_id;
  copts->request_timeout_ms = 120000;
  copts->key_lists = options.key_list_cache;
  if (options.chunk_bytes > 0) copts->max_message_bytes = static_cast<uint64_t>(options.chunk_bytes);
  if (options.max_outstanding > 0) copts->max_outstanding = options.max_outstanding;
  if (!options.client_key_file.empty() || !options.server_public_key_file.empty()) {
    CurveConfig curve;
    curve.set_client_secret_key_file(options.client_key_file);
    curve.set_server_public_key_file(options.server_public_key_file);
    auto keys = CurveClientOptions(curve);
    if (!keys.ok()) {
      std::fprintf(stderr, "tether-bench kv: %s\n", keys.status().message().c_str());
      return false;
    }
    copts->curve = *keys;
  }
  for (const auto& shape : shapes) {
    const int64_t dim = shape.second;
    if (std::find(dims->begin(), dims->end(), dim) != dims->end()) continue;
    TableSpec spec;
    spec.set_id(static_cast<uint32_t>(dims->size()));
    spec.set_name("d" + std::to_string(dim));
    spec.set_kind(TableSpec::ROW);
    spec.set_dim(static_cast<uint32_t>(dim));
    spec.mutable_init()->set_kind(TableInitializer::ZEROS);
    spec.mutable_optimizer()->set_type(type);
    spec.mutable_optimizer()->set_learning_rate(1e-6f);
    spec.mutable_consistency()->set_model(ASP);
    spec.mutable_consistency()->set_staleness(-1);
    spec.mutable_consistency()->set_cache(false);
    spec.set_pull_wire(wire);
    spec.set_push_wire(wire);
    copts->tables.push_back(spec);
    copts->error_feedback.push_back(IsHalfWire(wire) && options.error_feedback);
    dims->push_back(dim);
  }
  return true;
}

// One RESULT line: n keys of `dim` floats in `table`. Errors: the client's.
Status MeasureShape(const KvBenchOptions& options, WorkerClient* client, uint32_t table, int64_t n, int64_t dim) {
  // Fixed once, as kv_bench.cc's SArray keys: a named key list is not
  // compared again (FixedKeys).
  const FixedKeys keys = WorkerClient::FixKeys(RandomSortedKeys(n, options.key_seed));
  const size_t num_values = static_cast<size_t>(n * dim);
  std::vector<float> push_vals, pull_vals(num_values);
  // The same gradient every push: filled once, as kv_bench.cc fills its
  // SArray, and sent by reference unless --push_copy.
  PushValues shared;
  if (options.push_copy) {
    push_vals.assign(num_values, static_cast<float>(options.push_value));
  } else {
    shared = client->NewPushValues(num_values);
    std::fill(shared.data(), shared.data() + num_values, static_cast<float>(options.push_value));
  }
  auto push = [&]() -> Status {
    if (options.push_copy)
      client->PushRows(table, keys.keys(), push_vals.data());
    else
      client->PushRows(table, keys, shared);
    return client->WaitAll();
  };
  auto pull = [&]() -> Status { return client->PullRows(table, keys, pull_vals.data()).Wait(); };
  TETHER_RETURN_IF_ERROR(push());
  TETHER_RETURN_IF_ERROR(pull());
  std::vector<double> t_push, t_pull;
  const double start = Now();
  while (static_cast<int>(t_push.size()) < options.timing.max_reps &&
         (static_cast<int>(t_push.size()) < options.timing.min_reps || Now() - start < 2 * options.timing.min_time_s)) {
    double t0 = Now();
    TETHER_RETURN_IF_ERROR(push());
    t_push.push_back(Now() - t0);
    t0 = Now();
    TETHER_RETURN_IF_ERROR(pull());
    t_pull.push_back(Now() - t0);
  }
  std::printf("RESULT %lld %lld %.4f %.4f %d\n", static_cast<long long>(n), static_cast<long long>(dim),
              Summarize(t_push).median * 1e3, Summarize(t_pull).median * 1e3, static_cast<int>(t_push.size()));
  std::fflush(stdout);
  return Status::OK();
}

}  // namespace

int RunKvBench(const KvBenchOptions& options) {
  if (options.server.empty()) {
    std::fprintf(stderr, "tether-bench kv: --server=ENDPOINT (a running tether-server) is required\n");
    return 2;
  }
  OptimizerType type;
  if (options.optimizer == "sgd") {
    type = SGD;
  } else if (options.optimizer == "noop") {
    type = NOOP;
  } else {
    std::fprintf(stderr, "tether-bench kv: unknown --optimizer=%s (sgd, noop)\n", options.optimizer.c_str());
    return 2;
  }
  WireEncoding wire = FP32;
  if (options.wire == "bf16") {
    wire = BF16;
  } else if (options.wire == "fp16") {
    wire = FP16;
  } else if (options.wire != "fp32") {
    std::fprintf(stderr, "tether-bench kv: unknown --wire=%s (fp32, bf16, fp16)\n", options.wire.c_str());
    return 2;
  }
  std::vector<std::pair<int64_t, int64_t>> shapes;
  if (!ParseShapes("kv", options.shapes, &shapes)) return 2;
  ClientOptions copts;
  std::vector<int64_t> table_dims;
  if (!KvClientOptions(options, type, wire, shapes, &copts, &table_dims)) return 2;
  auto client = WorkerClient::Connect(copts);
  if (!client.ok()) {
    std::fprintf(stderr, "tether-bench kv: %s\n", client.status().message().c_str());
    return 1;
  }
  std::printf("READY\n");
  std::fflush(stdout);
  for (const auto& [n, dim] : shapes) {
    const auto table =
        static_cast<uint32_t>(std::find(table_dims.begin(), table_dims.end(), dim) - table_dims.begin());
    if (Status st = MeasureShape(options, client->get(), table, n, dim); !st.ok()) {
      std::fprintf(stderr, "tether-bench kv: %lld x %lld: %s\n", static_cast<long long>(n),
                   static_cast<long long>(dim), st.message().c_str());
      return 1;
    }
  }
  const Status bye = JobSession(client->get()).Bye();
  if (!bye.ok()) {
    std::fprintf(stderr, "tether-bench kv: %s\n", bye.message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace tether
