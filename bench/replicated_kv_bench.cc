#include "bench/replicated_kv_bench.h"

#include <cstdio>
#include <memory>
#include <vector>

namespace tether {
namespace {

// Keys spread over the id space as feature ids are: every 3rd id
// (TransportConfig sizes the key space to them).
std::vector<uint64_t> SpreadKeys(int64_t n) {
  std::vector<uint64_t> keys(n);
  for (int64_t i = 0; i < n; ++i) keys[i] = static_cast<uint64_t>(i) * 3;
  return keys;
}

// One variant of a cell: its cluster and its timed operations (seconds).
struct Side {
  int64_t replicas = 0;
  std::unique_ptr<BenchCluster> cluster;
  std::vector<double> push, pull;
};

Status Push(WorkerClient& client, const std::vector<uint64_t>& keys, const std::vector<float>& values) {
  client.PushRows(0, keys, values.data());
  return client.WaitAll();
}

// Times a push then a pull on every side in turn until the cell has its
// reps and time; the first error is returned.
Status TimeSides(const BenchTiming& timing, const std::vector<uint64_t>& keys, std::vector<float>* buf,
                 std::vector<Side>* sides) {
  for (Side& side : *sides) {  // untimed: creates the rows, fills the frame pools
    TETHER_RETURN_IF_ERROR(Push(side.cluster->client(), keys, *buf));
    TETHER_RETURN_IF_ERROR(side.cluster->client().PullRows(0, keys, buf->data()).Wait());
  }
  const double start = Now();
  const auto done = [&] {
    const int reps = static_cast<int>(sides->front().push.size());
    return reps >= timing.max_reps || (reps >= timing.min_reps && Now() - start >= 2 * timing.min_time_s);
  };
  while (!done()) {
    for (Side& side : *sides) {
      WorkerClient& client = side.cluster->client();
      double t0 = Now();
      TETHER_RETURN_IF_ERROR(Push(client, keys, *buf));
      side.push.push_back(Now() - t0);
      t0 = Now();
      TETHER_RETURN_IF_ERROR(client.PullRows(0, keys, buf->data()).Wait());
      side.pull.push_back(Now() - t0);
    }
  }
  return Status::OK();
}

void PrintHeader() {
  std::printf("## kv: push and pull with and without a replica, loopback, one request in flight\n\n");
  std::printf("replicas 1: every shard's input is forwarded to its copy (a ReplicaHost) and its reply held\n"
              "until the copy acknowledged it. Variants measured alternately in the same run. GB/s counts\n"
              "value bytes only; `×` = p50 latency ÷ the first variant's p50.\n\n");
  std::printf("| servers | keys | dim | replicas | reps | push p50 ms | push GB/s | push × | pull p50 ms | "
              "pull GB/s | pull × |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::fflush(stdout);
}

void PrintRows(int64_t servers, int64_t n, int64_t dim, const std::vector<Side>& sides) {
  const double bytes = static_cast<double>(n) * static_cast<double>(dim) * sizeof(float);
  const double base_push = Summarize(sides.front().push).median, base_pull = Summarize(sides.front().pull).median;
  for (const Side& side : sides) {
    const Summary push = Summarize(side.push), pull = Summarize(side.pull);
    std::printf("| %lld | %lld | %lld | %lld | %d | %s | %s | %s | %s | %s | %s |\n", static_cast<long long>(servers),
                static_cast<long long>(n), static_cast<long long>(dim), static_cast<long long>(side.replicas),
                push.reps, Fmt("%.3f", push.median * 1e3).c_str(), Fmt("%.2f", bytes / push.median / 1e9).c_str(),
                Fmt("%.2f", push.median / base_push).c_str(), Fmt("%.3f", pull.median * 1e3).c_str(),
                Fmt("%.2f", bytes / pull.median / 1e9).c_str(), Fmt("%.2f", pull.median / base_pull).c_str());
  }
  std::fflush(stdout);
}

// One cell: a cluster per variant, timed side by side, then one row each.
int RunCell(const ReplicatedKvBenchOptions& options, const std::vector<int64_t>& variants, int64_t servers, int64_t n,
            int64_t dim) {
  std::vector<Side> sides;
  for (int64_t r : variants) {
    JobConfig config = TransportConfig(static_cast<int>(servers), dim, n);
    config.mutable_cluster()->set_replicas(static_cast<int32_t>(r));
    auto cluster = BenchCluster::Start(config, options.client);
    if (!cluster.ok()) {
      std::fprintf(stderr, "tether-bench kv: replicas %lld: %s\n", static_cast<long long>(r),
                   cluster.status().message().c_str());
      return 1;
    }
    sides.push_back(Side{r, std::move(*cluster), {}, {}});
  }
  const std::vector<uint64_t> keys = SpreadKeys(n);
  std::vector<float> buf(static_cast<size_t>(n * dim), 0.5f);
  if (Status st = TimeSides(options.timing, keys, &buf, &sides); !st.ok()) {
    std::fprintf(stderr, "tether-bench kv: %lld servers, %lld x %lld: %s\n", static_cast<long long>(servers),
                 static_cast<long long>(n), static_cast<long long>(dim), st.message().c_str());
    return 1;
  }
  PrintRows(servers, n, dim, sides);
  for (Side& side : sides) {
    if (Status st = side.cluster->Bye(); !st.ok()) {
      std::fprintf(stderr, "tether-bench kv: %s\n", st.message().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace

int RunReplicatedKvBench(const ReplicatedKvBenchOptions& options) {
  const std::vector<int64_t> variants = ParseList(options.replicas);
  const std::vector<int64_t> servers_list = ParseList(options.servers);
  bool replicated = false;
  for (int64_t r : variants) {
    if (r != 0 && r != 1) {
      std::fprintf(stderr, "tether-bench kv: --replicas=%s: each variant is 0 or 1\n", options.replicas.c_str());
      return 2;
    }
    replicated = replicated || r == 1;
  }
  if (variants.empty() || servers_list.empty()) {
    std::fprintf(stderr, "tether-bench kv: --replicas and --servers need at least one value each (e.g. 0,1 and 2)\n");
    return 2;
  }
  for (int64_t s : servers_list) {
    if (s < 1 || (replicated && s < 2)) {
      std::fprintf(stderr, "tether-bench kv: --servers=%lld: a replica needs at least 2 servers\n",
                   static_cast<long long>(s));
      return 2;
    }
  }
  std::vector<std::pair<int64_t, int64_t>> shapes;
  if (!ParseShapes("kv", options.shapes, &shapes)) return 2;
  PrintHeader();
  for (int64_t servers : servers_list)
    for (const auto& [n, dim] : shapes)
      if (const int code = RunCell(options, variants, servers, n, dim); code != 0) return code;
  return 0;
}

}  // namespace tether
