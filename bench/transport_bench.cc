#include "bench/transport_bench.h"

#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "bench/raw_zmq.h"
#include "core/net/curve.h"
#include "core/net/frame_pool.h"

namespace tether {
namespace {

// One Tether operation on `client`: a push of `buf` (applied and
// acknowledged) or a pull into it, of `keys`' rows of table 0.
Status TetherOp(WorkerClient& client, bool push, const std::vector<uint64_t>& keys, std::vector<float>* buf) {
  if (push) {
    client.PushRows(0, keys, buf->data());
    return client.WaitAll();
  }
  return client.PullRows(0, keys, buf->data()).Wait();
}

// Keys spread over the id space as feature ids are: every 3rd id.
std::vector<uint64_t> SpreadKeys(int64_t n) {
  std::vector<uint64_t> keys(n);
  for (int64_t i = 0; i < n; ++i) keys[i] = static_cast<uint64_t>(i) * 3;
  return keys;
}

// Times `a` and `b` alternately until the cell has its reps and time;
// stops at the first error of either (returned).
Status Alternate(const BenchTiming& timing, const std::function<Status()>& a, const std::function<Status()>& b,
                 std::vector<double>* ta, std::vector<double>* tb) {
  const double start = Now();
  while (static_cast<int>(ta->size()) < timing.max_reps &&
         (static_cast<int>(ta->size()) < timing.min_reps || Now() - start < 2 * timing.min_time_s)) {
    double t0 = Now();
    TETHER_RETURN_IF_ERROR(a());
    ta->push_back(Now() - t0);
    t0 = Now();
    TETHER_RETURN_IF_ERROR(b());
    tb->push_back(Now() - t0);
  }
  return Status::OK();
}

// Fresh CURVE key pairs "server" and "client" in `dir`. False (after a
// line on stderr) when they cannot be made.
bool WriteBenchKeys(const std::string& dir) {
  for (const char* name : {"server", "client"}) {
    auto keys = NewCurveKeyPair();
    Status st = keys.ok() ? WriteCurveKeyFiles(dir, name, *keys) : keys.status();
    if (!st.ok()) {
      std::fprintf(stderr, "tether-bench transport: %s\n", st.message().c_str());
      return false;
    }
  }
  return true;
}

void PrintCurveHeader() {
  std::printf("## Transport: CURVE on vs off, loopback, one request in flight\n\n");
  std::printf("Tether push/pull with security.curve (CurveZMQ: every message encrypted and authenticated by\n"
              "libzmq/libsodium) and without, measured alternately in the same run against two sets of\n"
              "shards in this process. GB/s counts value bytes only (keys add 8 bytes per key); latency is\n"
              "one request split over the shards until every shard answered. `on/off` = CURVE GB/s ÷\n"
              "plain GB/s from the medians (1.00: encryption is free; 0.25: a quarter of the throughput).\n\n");
  std::printf("| servers | keys | dim | op | reps | off p50 ms | off GB/s | on p50 ms | on GB/s | on/off |\n");
  std::printf("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|\n");
  std::fflush(stdout);
}

// The two sides of one row of the CURVE table: CURVE off (side[0]) and on.
int CurveCells(const TransportBenchOptions& options, const std::string& dir, int64_t servers, int64_t n, int64_t dim) {
  const JobConfig config = TransportConfig(static_cast<int>(servers), dim, n);
  std::unique_ptr<BenchCluster> side[2];
  for (int on = 0; on < 2; ++on) {
    JobConfig c = config;
    if (on) {
      CurveConfig* curve = c.mutable_security()->mutable_curve();
      curve->set_server_secret_key_file(dir + "/server.key");
      curve->set_server_public_key_file(dir + "/server.pub");
      curve->set_client_secret_key_file(dir + "/client.key");
      curve->add_authorized_keys(dir + "/client.pub");
    }
    auto started = BenchCluster::Start(c, options.client);
    if (!started.ok()) {
      std::fprintf(stderr, "tether-bench transport: %s\n", started.status().message().c_str());
      return 1;
    }
    side[on] = std::move(*started);
  }
  const double value_bytes = static_cast<double>(n) * dim * 4;
  const std::vector<uint64_t> keys = SpreadKeys(n);
  std::vector<float> buf(static_cast<size_t>(n * dim), 0.5f);
  for (const std::string& op : ParseNames(options.ops)) {
    const bool push = op == "push";
    std::vector<double> t[2];
    Status st;
    for (int on = 0; on < 2 && st.ok(); ++on) st = TetherOp(side[on]->client(), push, keys, &buf);  // warm-up
    if (st.ok())
      st = Alternate(options.timing, [&] { return TetherOp(side[0]->client(), push, keys, &buf); },
                     [&] { return TetherOp(side[1]->client(), push, keys, &buf); }, &t[0], &t[1]);
    if (!st.ok()) {
      std::fprintf(stderr, "tether-bench transport: %s\n", st.message().c_str());
      return 1;
    }
    const Summary off = Summarize(t[0]), on = Summarize(t[1]);
    std::printf("| %lld | %s | %lld | %s | %d | %.3f | %.3f | %.3f | %.3f | %.2f |\n",
                static_cast<long long>(servers), Si(static_cast<double>(n)).c_str(), static_cast<long long>(dim),
                op.c_str(), off.reps, off.median * 1e3, value_bytes / off.median / 1e9, on.median * 1e3,
                value_bytes / on.median / 1e9, off.median / on.median);
    std::fflush(stdout);
  }
  return 0;
}

int RunTransportCurve(const TransportBenchOptions& options) {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  if (!ParseShapes("transport", options.shapes, &shapes)) return 2;
  // Fresh keys for this run, in a private directory removed at the end.
  std::string dir = (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + std::string("/tether-bench-keys.XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) {
    std::fprintf(stderr, "tether-bench transport: cannot create a key directory under %s\n", dir.c_str());
    return 1;
  }
  struct RemoveDir {
    std::string dir;
    ~RemoveDir() { std::filesystem::remove_all(dir); }
  } remove_dir{dir};
  if (!WriteBenchKeys(dir)) return 1;
  PrintCurveHeader();
  for (int64_t servers : ParseList(options.servers)) {
    for (const auto& [n, dim] : shapes)
      if (const int code = CurveCells(options, dir, servers, n, dim); code != 0) return code;
  }
  return 0;
}

void PrintTransportHeader(const TransportBenchOptions& options) {
  std::printf("## Transport: Tether push/pull vs raw ZeroMQ, loopback, one request in flight\n\n");
  std::printf("Values are float32; GB/s counts value bytes only (keys add 8 bytes per key). Latency is one\n"
              "request split over the shards until every shard answered; p99 is the largest sample when\n"
              "a cell has fewer than 100. `raw` is a DEALER/ROUTER pair moving the same frames with\n"
              "zero-copy sends and no parsing (the transport ceiling); `ratio` = Tether GB/s ÷ raw GB/s\n"
              "(keys/s for dim 1), from the medians, measured alternately in the same run. Both sides cut\n"
              "each shard's part into messages of at most %lld bytes of values (--chunk_bytes; 0 = one\n"
              "message per shard) and send them all before waiting. Tether builds large frames in recycled,\n"
              "pre-faulted buffers (core/net/frame_pool.h, at most %llu MiB idle per pool); the untimed\n"
              "warm-up request of each cell fills those pools as a user's first request would.\n\n",
              static_cast<long long>(options.client.chunk_bytes),
              static_cast<unsigned long long>(kDefaultFramePoolIdleBytes >> 20));
  std::printf("| servers | keys | dim | op | reps | Tether p50 ms | Tether p99 ms | Tether keys/s | Tether GB/s "
              "| raw p50 ms | raw GB/s | ratio |\n");
  std::printf("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::fflush(stdout);
}

// The rows of one request size against Tether and raw ZeroMQ.
int RawCells(const TransportBenchOptions& options, BenchCluster* cluster, RawClient* raw, int64_t servers, int64_t dim,
             int64_t n) {
  const double value_bytes = static_cast<double>(n) * dim * 4;
  if (value_bytes > options.max_bytes) {
    std::printf("| %lld | %s | %lld | - | skipped: %.2f GB per request > --max_bytes | | | | | | | |\n",
                static_cast<long long>(servers), Si(n).c_str(), static_cast<long long>(dim), value_bytes / 1e9);
    return 0;
  }
  const std::vector<uint64_t> keys = SpreadKeys(n);
  std::vector<float> buf(static_cast<size_t>(n * dim), 0.5f);
  const char* key_bytes = reinterpret_cast<const char*>(keys.data());
  for (const std::string& op : ParseNames(options.ops)) {
    const bool push = op == "push";
    const auto raw_op = [&] { return raw->Op(push, n, dim, key_bytes, reinterpret_cast<const char*>(buf.data())); };
    // Warm-up: creates the rows on the servers, grows every buffer.
    Status st = TetherOp(cluster->client(), push, keys, &buf);
    if (st.ok()) st = raw_op();
    std::vector<double> t_tether, t_raw;
    if (st.ok())
      st = Alternate(options.timing, [&] { return TetherOp(cluster->client(), push, keys, &buf); }, raw_op, &t_tether,
                     &t_raw);
    if (!st.ok()) {
      std::fprintf(stderr, "tether-bench: %s\n", st.message().c_str());
      return 1;
    }
    const Summary a = Summarize(t_tether), b = Summarize(t_raw);
    std::printf("| %lld | %s | %lld | %s | %d | %.3f | %.3f | %s | %.3f | %.3f | %.3f | %.2f |\n",
                static_cast<long long>(servers), Si(n).c_str(), static_cast<long long>(dim), op.c_str(), a.reps,
                a.median * 1e3, a.p99 * 1e3, Si(n / a.median).c_str(), value_bytes / a.median / 1e9, b.median * 1e3,
                value_bytes / b.median / 1e9, b.median / a.median);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int RunTransportBench(const TransportBenchOptions& options) {
  if (options.curve) return RunTransportCurve(options);
  const std::vector<int64_t> keys_list = ParseList(options.keys);
  if (keys_list.empty()) {
    std::fprintf(stderr, "tether-bench transport: --keys names no request size (e.g. --keys=100,100000)\n");
    return 2;
  }
  const std::vector<int64_t> dims = ParseList(options.dims.empty() ? "1,16,64,256" : options.dims);
  const std::vector<int64_t> servers_list = ParseList(options.servers);
  PrintTransportHeader(options);
  for (int64_t servers : servers_list) {
    for (int64_t dim : dims) {
      const JobConfig config =
          TransportConfig(static_cast<int>(servers), dim, *std::max_element(keys_list.begin(), keys_list.end()));
      auto cluster = BenchCluster::Start(config, options.client);
      if (!cluster.ok()) {
        std::fprintf(stderr, "tether-bench: %s\n", cluster.status().message().c_str());
        return 1;
      }
      std::vector<std::unique_ptr<RawServer>> raw_servers;
      std::vector<std::string> raw_endpoints;
      for (int s = 0; s < servers; ++s) {
        raw_servers.push_back(std::make_unique<RawServer>());
        raw_endpoints.push_back(raw_servers.back()->endpoint());
      }
      RawClient raw(raw_endpoints, options.client.chunk_bytes);
      for (int64_t n : keys_list)
        if (const int code = RawCells(options, cluster->get(), &raw, servers, dim, n); code != 0) return code;
      Status st = (*cluster)->Bye();
      if (!st.ok()) std::fprintf(stderr, "tether-bench: %s\n", st.message().c_str());
    }
  }
  return 0;
}

}  // namespace tether
