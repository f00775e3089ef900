// tether-bench: benchmarks that print Markdown tables, each figure set
// against a baseline measured in the same run on the same machine (absolute
// times on shared machines drift; same-run ratios do not).
//
//   tether-bench transport   Tether push/pull over loopback vs a minimal
//                            ZeroMQ DEALER/ROUTER pair moving the same bytes;
//                            with --curve, CURVE on vs off side by side
//   tether-bench updates     server-side SGD/AdaGrad/Adam on pushed rows
//                            (one core) vs a STREAM copy/triad probe
//   tether-bench kv          the worker side of scripts/bench_pslite.sh:
//                            push/pull request shapes against a separately
//                            started tether-server, timed as ps-lite's side is
//   tether-bench rendezvous  N processes (S servers publish, the rest look
//                            every one up) against the directory and the
//                            store backends, vs the same processes with no
//                            rendezvous
//   tether-bench order       the worker's per-epoch row order (one epoch per
//                            line), for baselines that must see the same
//                            minibatches (scripts/bench_train.sh)
//
// Every flag is listed by `tether-bench --help`; docs/PERFORMANCE.md gives
// the commands behind its tables.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/wait.h>
#include <zmq.hpp>

#include "core/config.h"
#include "core/net/rendezvous.h"
#include "core/partition.h"
#include "core/prefetch.h"
#include "core/table_spec.h"
#include "core/net/curve.h"
#include "checkpoint/checkpoint.h"
#include "optim/optimizer.h"
#include "server/server.h"
#include "server/table.h"
#include "server/table_checkpoint.h"
#include "worker/client/client.h"
#include "worker/client/job_session.h"
#include "cli/flag_parser.h"
#include "worker/sampling.h"
#include "worker/trainer.h"
#include "tools/random_keys.h"

DEFINE_string(keys, "100,1000,10000,100000,1000000", "transport: key counts per request");
DEFINE_string(dims, "", "row widths in floats (default: transport 1,16,64,256; updates 64,256)");
DEFINE_string(servers, "1,2", "transport: server shard counts");
DEFINE_string(ops, "pull,push", "transport: operations to measure");
DEFINE_double(min_time_s, 0.3, "measure each cell for at least this long (seconds)");
DEFINE_int32(min_reps, 5, "at least this many timed operations per cell");
DEFINE_int32(max_reps, 300, "at most this many timed operations per cell");
DEFINE_double(max_bytes, 1.1e9, "transport: skip cells whose values exceed this many bytes per request");
DEFINE_int64(chunk_bytes, 16 << 20,
             "transport: largest message, both sides: Tether's ClientOptions::max_message_bytes, and the raw "
             "side splits the same way (0 = one message per shard); above glibc's 32 MiB mmap threshold every "
             "buffer is a fresh mapping and page faults dominate");
DEFINE_int32(max_outstanding, 0, "transport: Tether client's requests in flight per shard (0 = the client's default)");
DEFINE_int64(rows, 500000,
             "updates: rows in the table, at least; raised per cell until the rows' weights and state are "
             "--llc_multiple × the last-level cache");
DEFINE_double(llc_multiple, 4, "updates: the working set (rows × (weights + state) bytes) as a multiple of the LLC");
DEFINE_int64(llc_bytes, 0,
             "updates: last-level cache in bytes (0 = read from sysfs, else sysconf(_SC_LEVEL3_CACHE_SIZE), "
             "else the 64 MiB fallback)");
DEFINE_int32(batch, 1000, "updates: rows per push (random, sorted, unique)");
DEFINE_string(optimizers, "sgd,adagrad,adam", "updates: server optimizers to measure");
DEFINE_int64(stream_floats, 1 << 25,
             "updates: floats per array of the bandwidth probe (3 arrays), at least; raised until each array is "
             "--llc_multiple × the last-level cache, as STREAM requires");
DEFINE_string(server, "", "kv: endpoint of a running tether-server (tcp://127.0.0.1:PORT)");
DEFINE_string(job_id, "tether-bench-kv", "kv: the server's job id (its config's name or cluster.job_id)");
DEFINE_string(shapes, "1x1,100000x1,1000000x1,1024x4096,100000x64,100000x256",
              "kv and transport --curve: request shapes, KEYSxDIM (floats per key), comma-separated");
DEFINE_string(optimizer, "sgd", "kv: the tables' server-side update, sgd or noop (checks and lookups, no arithmetic)");
DEFINE_bool(curve, false,
            "transport: Tether with CURVE on (security.curve: authenticated, encrypted) side by side with CURVE off, "
            "over the --shapes request shapes, instead of Tether vs raw ZeroMQ");
DEFINE_string(client_key_file, "", "kv: this client's CURVE key pair (NAME.key); with --server_public_key_file: CURVE on");
DEFINE_string(server_public_key_file, "", "kv: the server's CURVE public key (NAME.pub)");
DEFINE_double(push_value, 0.5, "kv: the value of every pushed float (a recognisable pattern for wire captures)");
DEFINE_bool(key_list_cache, true,
            "kv: name repeated key lists instead of sending their keys, where the server keeps lists "
            "(tether-server --key_list_cache_bytes; core/net/key_list_cache.h); false: every request carries its keys");
DEFINE_bool(push_copy, false,
            "kv: push from a plain buffer that the client copies into each push (PushRows(const float*)); "
            "default false pushes a PushValues buffer by reference, as ps-lite's ZPush sends its SArray");
DEFINE_uint64(key_seed, 1, "kv: seed of the random sorted uint64 keys (tools/pslite_kv/kv_bench.cc draws the same)");
DEFINE_uint64(seed, 1, "order: train.seed");
DEFINE_string(ckpt_dir, "", "checkpoint: where to write (default: $TMPDIR/tether-bench-checkpoint.PID); removed after");
DEFINE_int64(ckpt_features, 135909, "checkpoint: input features (rows of w1); default Amazon-670K's");
DEFINE_int64(ckpt_labels, 670091, "checkpoint: labels (rows of w2, size of b2); default Amazon-670K's");
DEFINE_int32(ckpt_hidden, 256, "checkpoint: hidden width (dim of w1 and w2 rows)");
DEFINE_int32(ckpt_servers, 2, "checkpoint: shards writing (threads, as servers on one host)");
DEFINE_int32(ckpt_load_servers, 3, "checkpoint: shards loading it back (another count re-shards)");
DEFINE_int32(rank, 0, "order: worker rank");
DEFINE_int32(epochs, 1, "order: epochs to print");
DEFINE_int64(order_rows, 0, "order: rows in the worker's partition");

namespace tether {
namespace {

using SteadyClock = std::chrono::steady_clock;

double Now() { return std::chrono::duration<double>(SteadyClock::now().time_since_epoch()).count(); }

std::vector<int64_t> ParseList(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(static_cast<int64_t>(std::stod(item)));
  }
  return out;
}

std::vector<std::string> ParseNames(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

struct Summary {
  double median = 0, p99 = 0;
  int reps = 0;
};

// Nearest-rank percentiles of the timed operations (seconds).
Summary Summarize(std::vector<double> t) {
  Summary s;
  s.reps = static_cast<int>(t.size());
  if (t.empty()) return s;
  std::sort(t.begin(), t.end());
  s.median = t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
  s.p99 = t[std::min(t.size() - 1, static_cast<size_t>(std::ceil(0.99 * t.size())) - 1)];
  return s;
}

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

// Large counts for tables: 1.2e6 → "1.2M".
std::string Si(double v) {
  if (v >= 1e9) return Fmt("%.2fG", v / 1e9);
  if (v >= 1e6) return Fmt("%.2fM", v / 1e6);
  if (v >= 1e3) return Fmt("%.1fk", v / 1e3);
  return Fmt("%.0f", v);
}

// ------------------------------------------------------------------ raw ZeroMQ

// The baseline: one ROUTER per "shard" answering from a pre-filled buffer
// with zero-copy sends, one DEALER per shard on the client, no parsing, no
// lookups, no scatter. What it moves is exactly Tether's payload: keys up,
// values down for a pull; keys and values up, an empty ack down for a push.
struct RawRequest {
  uint32_t op;           // 0 = pull, 1 = push
  uint32_t pad;
  uint64_t reply_bytes;  // pull: bytes to send back
};

class RawServer {
 public:
  RawServer() : socket_(ctx_, zmq::socket_type::router) {
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind("tcp://127.0.0.1:0");
    endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { Loop(); });
  }
  ~RawServer() {
    stop_.store(true);
    thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }

 private:
  void Loop() {
    zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}};
    std::vector<zmq::message_t> frames;
    while (!stop_.load()) {
      zmq::poll(items, 1, std::chrono::milliseconds(50));
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      frames.clear();
      while (true) {
        zmq::message_t f;
        if (!socket_.recv(f, zmq::recv_flags::none)) break;
        const bool more = f.more();
        frames.push_back(std::move(f));
        if (!more) break;
      }
      if (frames.size() < 2 || frames[1].size() != sizeof(RawRequest)) continue;
      RawRequest req;
      std::memcpy(&req, frames[1].data(), sizeof(req));
      socket_.send(frames[0], zmq::send_flags::sndmore);
      if (req.op == 0) {
        if (buffer_.size() < req.reply_bytes) {
          buffer_.assign(req.reply_bytes, 1);  // first request of a size: fault the pages in, untimed (warm-up)
        }
        zmq::message_t reply(buffer_.data(), req.reply_bytes, nullptr, nullptr);  // zero-copy, never freed
        socket_.send(reply, zmq::send_flags::none);
      } else {
        socket_.send(zmq::message_t(), zmq::send_flags::none);
      }
    }
  }

  zmq::context_t ctx_{1};
  zmq::socket_t socket_;
  std::string endpoint_;
  std::vector<char> buffer_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class RawClient {
 public:
  RawClient(const std::vector<std::string>& endpoints, int64_t chunk_bytes) : chunk_bytes_(chunk_bytes) {
    for (const auto& ep : endpoints) {
      sockets_.emplace_back(ctx_, zmq::socket_type::dealer);
      sockets_.back().set(zmq::sockopt::linger, 0);
      sockets_.back().connect(ep);
    }
  }

  // n / S keys per shard (the remainder to shard 0), each shard's part cut
  // into messages of at most chunk_bytes of values, all sent before any
  // reply is awaited (as Tether's client does); then waits for every reply.
  void Op(bool push, int64_t n, int64_t dim, const char* keys, const char* values) {
    const int64_t s_count = static_cast<int64_t>(sockets_.size());
    const int64_t chunk = chunk_bytes_ > 0 ? std::max<int64_t>(1, chunk_bytes_ / (dim * 4)) : n;
    std::vector<int64_t> pending(s_count, 0);
    int64_t offset = 0, total = 0;
    for (int64_t s = 0; s < s_count; ++s) {
      const int64_t ns = n / s_count + (s == 0 ? n % s_count : 0);
      for (int64_t c0 = 0; c0 < ns; c0 += chunk) {
        const int64_t nc = std::min(chunk, ns - c0);
        const int64_t at = offset + c0;
        RawRequest req{push ? 1u : 0u, 0, static_cast<uint64_t>(nc * dim * 4)};
        sockets_[s].send(zmq::message_t(&req, sizeof(req)), zmq::send_flags::sndmore);
        zmq::message_t k(const_cast<char*>(keys + at * 8), nc * 8, nullptr, nullptr);
        if (push) {
          sockets_[s].send(k, zmq::send_flags::sndmore);
          zmq::message_t v(const_cast<char*>(values + at * dim * 4), nc * dim * 4, nullptr, nullptr);
          sockets_[s].send(v, zmq::send_flags::none);
        } else {
          sockets_[s].send(k, zmq::send_flags::none);
        }
        ++pending[s];
        ++total;
      }
      offset += ns;
    }
    std::vector<zmq::pollitem_t> items;
    for (auto& s : sockets_) items.push_back({s.handle(), 0, ZMQ_POLLIN, 0});
    while (total > 0) {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(-1));
      for (int64_t s = 0; s < s_count; ++s) {
        if (pending[s] == 0 || !(items[s].revents & ZMQ_POLLIN)) continue;
        zmq::message_t m;
        while (pending[s] > 0 && sockets_[s].recv(m, zmq::recv_flags::dontwait)) {
          --pending[s];
          --total;
        }
      }
    }
  }

 private:
  int64_t chunk_bytes_;
  zmq::context_t ctx_{1};
  std::vector<zmq::socket_t> sockets_;
};

// ------------------------------------------------------------------ transport

// keys: the most keys one request of the run sends. They are every third
// id from 0 (so a shard's part is not one dense block), and the key space is
// sized to them: the server checks that its shard of every table fits in
// memory at full size (server/shard_memory.h), so a key space of 2^40 rows
// was refused.
JobConfig TransportConfig(int servers, int64_t dim, int64_t keys) {
  JobConfig c;
  c.set_name("tether-bench-transport");
  c.mutable_cluster()->set_num_servers(servers);
  c.mutable_cluster()->set_num_workers(1);
  c.mutable_cluster()->set_idle_timeout_ms(3600 * 1000);
  c.mutable_cluster()->set_worker_timeout_ms(3600 * 1000);
  c.mutable_data()->set_index_base(0);
  c.mutable_data()->set_num_features(3 * std::max<int64_t>(1, keys));
  c.mutable_data()->set_num_labels(1);
  c.mutable_data()->set_train_file("unused");
  c.mutable_model()->set_hidden(static_cast<int32_t>(dim));  // table 0 ("w1") has rows of `dim` floats
  c.mutable_optimizer()->set_type(SGD);
  c.mutable_optimizer()->set_learning_rate(1e-6f);
  // Pulls never wait on a bound, and no worker-side cache answers for the
  // server: every operation crosses the wire.
  c.mutable_consistency()->set_model(ASP);
  c.mutable_consistency()->set_staleness(-1);
  c.mutable_consistency()->set_cache(false);
  return c;
}

// ------------------------------------------------------------ transport --curve

// Shards in threads on 127.0.0.1 and one client, with CURVE on or off: one
// side of the CURVE comparison. Stops everything when destroyed.
class BenchCluster {
 public:
  ~BenchCluster() {
    if (client_ != nullptr) (void)JobSession(client_.get()).Bye();
    client_.reset();
    for (auto& sh : shards_) sh->Stop();
    for (auto& t : threads_) t.join();
  }
  static StatusOr<std::unique_ptr<BenchCluster>> Start(const JobConfig& config) {
    std::unique_ptr<BenchCluster> c(new BenchCluster);
    ClientOptions copts = ClientOptionsFor(config, 0, {});
    if (FLAGS_chunk_bytes > 0) copts.max_message_bytes = static_cast<uint64_t>(FLAGS_chunk_bytes);
    if (FLAGS_max_outstanding > 0) copts.max_outstanding = FLAGS_max_outstanding;
    if (config.security().has_curve()) {
      TETHER_ASSIGN_OR_RETURN(copts.curve, CurveClientOptions(config.security().curve()));
    }
    for (int s = 0; s < config.cluster().num_servers(); ++s) {
      c->shards_.push_back(std::make_unique<ServerShard>(config, s));
      TETHER_RETURN_IF_ERROR(c->shards_.back()->Bind("tcp://127.0.0.1:0"));
      copts.servers.push_back(c->shards_.back()->endpoint());
    }
    for (auto& sh : c->shards_) {
      ServerShard* p = sh.get();
      c->threads_.emplace_back([p] {
        Status st = p->Run();
        if (!st.ok()) LOG(ERROR) << st.message();
      });
    }
    TETHER_ASSIGN_OR_RETURN(c->client_, WorkerClient::Connect(copts));
    return c;
  }
  WorkerClient& client() { return *client_; }

 private:
  BenchCluster() = default;
  std::vector<std::unique_ptr<ServerShard>> shards_;
  std::vector<std::thread> threads_;
  std::unique_ptr<WorkerClient> client_;
};

// --shapes ("KEYSxDIM,...", KEYS may be written 1e5) as (keys, dim) pairs.
// False (after one line on stderr naming `mode` and the item) for a bad one.
bool ParseShapes(const char* mode, std::vector<std::pair<int64_t, int64_t>>* shapes) {
  for (const std::string& item : ParseNames(FLAGS_shapes)) {
    const size_t x = item.find('x');
    const int64_t n = x == std::string::npos ? 0 : static_cast<int64_t>(std::stod(item.substr(0, x)));
    const int64_t dim = x == std::string::npos ? 0 : std::stoll(item.substr(x + 1));
    if (n < 1 || dim < 1) {
      std::fprintf(stderr, "tether-bench %s: bad shape '%s' in --shapes (KEYSxDIM, both ≥ 1)\n", mode, item.c_str());
      return false;
    }
    shapes->emplace_back(n, dim);
  }
  return true;
}

int RunTransportCurve() {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  if (!ParseShapes("transport", &shapes)) return 2;
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
  for (const char* name : {"server", "client"}) {
    auto keys = NewCurveKeyPair();
    Status st = keys.ok() ? WriteCurveKeyFiles(dir, name, *keys) : keys.status();
    if (!st.ok()) {
      std::fprintf(stderr, "tether-bench transport: %s\n", st.message().c_str());
      return 1;
    }
  }
  std::printf("## Transport: CURVE on vs off, loopback, one request in flight\n\n");
  std::printf("Tether push/pull with security.curve (CurveZMQ: every message encrypted and authenticated by\n"
              "libzmq/libsodium) and without, measured alternately in the same run against two sets of\n"
              "shards in this process. GB/s counts value bytes only (keys add 8 bytes per key); latency is\n"
              "one request split over the shards until every shard answered. `on/off` = CURVE GB/s ÷\n"
              "plain GB/s from the medians (1.00: encryption is free; 0.25: a quarter of the throughput).\n\n");
  std::printf("| servers | keys | dim | op | reps | off p50 ms | off GB/s | on p50 ms | on GB/s | on/off |\n");
  std::printf("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|\n");
  std::fflush(stdout);
  for (int64_t servers : ParseList(FLAGS_servers)) {
    for (const auto& [n, dim] : shapes) {
      JobConfig config = TransportConfig(static_cast<int>(servers), dim, n);
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
        auto started = BenchCluster::Start(c);
        if (!started.ok()) {
          std::fprintf(stderr, "tether-bench transport: %s\n", started.status().message().c_str());
          return 1;
        }
        side[on] = std::move(*started);
      }
      const double value_bytes = static_cast<double>(n) * dim * 4;
      std::vector<uint64_t> keys(n);
      for (int64_t i = 0; i < n; ++i) keys[i] = static_cast<uint64_t>(i) * 3;
      std::vector<float> buf(static_cast<size_t>(n * dim), 0.5f);
      for (const std::string& op : ParseNames(FLAGS_ops)) {
        const bool push = op == "push";
        auto run = [&](WorkerClient& client) -> Status {
          if (push) {
            client.PushRows(0, keys, buf.data());
            return client.WaitAll();
          }
          return client.PullRows(0, keys, buf.data()).Wait();
        };
        std::vector<double> t[2];
        Status st;
        for (int on = 0; on < 2 && st.ok(); ++on) st = run(side[on]->client());  // warm-up, untimed
        const double start = Now();
        while (st.ok() && static_cast<int>(t[0].size()) < FLAGS_max_reps &&
               (static_cast<int>(t[0].size()) < FLAGS_min_reps || Now() - start < 2 * FLAGS_min_time_s)) {
          for (int on = 0; on < 2 && st.ok(); ++on) {
            const double t0 = Now();
            st = run(side[on]->client());
            t[on].push_back(Now() - t0);
          }
        }
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
    }
  }
  return 0;
}

int RunTransport() {
  if (FLAGS_curve) return RunTransportCurve();
  const std::vector<int64_t> keys_list = ParseList(FLAGS_keys);
  if (keys_list.empty()) {
    std::fprintf(stderr, "tether-bench transport: --keys names no request size (e.g. --keys=100,100000)\n");
    return 2;
  }
  const std::vector<int64_t> dims = ParseList(FLAGS_dims.empty() ? "1,16,64,256" : FLAGS_dims);
  const std::vector<int64_t> servers_list = ParseList(FLAGS_servers);
  const std::vector<std::string> ops = ParseNames(FLAGS_ops);
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
              static_cast<long long>(FLAGS_chunk_bytes),
              static_cast<unsigned long long>(kDefaultFramePoolIdleBytes >> 20));
  std::printf("| servers | keys | dim | op | reps | Tether p50 ms | Tether p99 ms | Tether keys/s | Tether GB/s "
              "| raw p50 ms | raw GB/s | ratio |\n");
  std::printf("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::fflush(stdout);
  for (int64_t servers : servers_list) {
    for (int64_t dim : dims) {
      const JobConfig config =
          TransportConfig(static_cast<int>(servers), dim, *std::max_element(keys_list.begin(), keys_list.end()));
      std::vector<std::unique_ptr<ServerShard>> shards;
      std::vector<std::thread> threads;
      ClientOptions copts = ClientOptionsFor(config, 0, {});
      if (FLAGS_chunk_bytes > 0) copts.max_message_bytes = static_cast<uint64_t>(FLAGS_chunk_bytes);
      if (FLAGS_max_outstanding > 0) copts.max_outstanding = FLAGS_max_outstanding;
      for (int s = 0; s < servers; ++s) {
        shards.push_back(std::make_unique<ServerShard>(config, s));
        Status st = shards.back()->Bind("tcp://127.0.0.1:0");
        if (!st.ok()) {
          std::fprintf(stderr, "tether-bench: %s\n", st.message().c_str());
          return 1;
        }
        copts.servers.push_back(shards.back()->endpoint());
      }
      for (auto& sh : shards) {
        ServerShard* p = sh.get();
        threads.emplace_back([p] {
          Status st = p->Run();
          if (!st.ok()) LOG(ERROR) << st.message();
        });
      }
      auto client_or = WorkerClient::Connect(copts);
      if (!client_or.ok()) {
        std::fprintf(stderr, "tether-bench: %s\n", client_or.status().message().c_str());
        for (auto& sh : shards) sh->Stop();
        for (auto& t : threads) t.join();
        return 1;
      }
      std::unique_ptr<WorkerClient> client = std::move(*client_or);
      std::vector<std::unique_ptr<RawServer>> raw_servers;
      std::vector<std::string> raw_endpoints;
      for (int s = 0; s < servers; ++s) {
        raw_servers.push_back(std::make_unique<RawServer>());
        raw_endpoints.push_back(raw_servers.back()->endpoint());
      }
      RawClient raw(raw_endpoints, FLAGS_chunk_bytes);

      for (int64_t n : keys_list) {
        const double value_bytes = static_cast<double>(n) * dim * 4;
        if (value_bytes > FLAGS_max_bytes) {
          std::printf("| %lld | %s | %lld | - | skipped: %.2f GB per request > --max_bytes | | | | | | | |\n",
                      static_cast<long long>(servers), Si(n).c_str(), static_cast<long long>(dim), value_bytes / 1e9);
          continue;
        }
        // Spread keys over the id space as feature ids are: every 3rd id.
        std::vector<uint64_t> keys(n);
        for (int64_t i = 0; i < n; ++i) keys[i] = static_cast<uint64_t>(i) * 3;
        std::vector<float> buf(static_cast<size_t>(n * dim), 0.5f);
        for (const std::string& op : ops) {
          const bool push = op == "push";
          auto tether_op = [&]() -> Status {
            if (push) {
              client->PushRows(0, keys, buf.data());
              return client->WaitAll();
            }
            return client->PullRows(0, keys, buf.data()).Wait();
          };
          // Warm-up: creates the rows on the servers, grows every buffer.
          Status st = tether_op();
          if (!st.ok()) {
            std::fprintf(stderr, "tether-bench: %s\n", st.message().c_str());
            return 1;
          }
          raw.Op(push, n, dim, reinterpret_cast<const char*>(keys.data()),
                 reinterpret_cast<const char*>(buf.data()));
          std::vector<double> t_tether, t_raw;
          const double start = Now();
          while (static_cast<int>(t_tether.size()) < FLAGS_max_reps &&
                 (static_cast<int>(t_tether.size()) < FLAGS_min_reps || Now() - start < 2 * FLAGS_min_time_s)) {
            double t0 = Now();
            st = tether_op();
            t_tether.push_back(Now() - t0);
            if (!st.ok()) {
              std::fprintf(stderr, "tether-bench: %s\n", st.message().c_str());
              return 1;
            }
            t0 = Now();
            raw.Op(push, n, dim, reinterpret_cast<const char*>(keys.data()),
                   reinterpret_cast<const char*>(buf.data()));
            t_raw.push_back(Now() - t0);
          }
          const Summary a = Summarize(t_tether), b = Summarize(t_raw);
          std::printf("| %lld | %s | %lld | %s | %d | %.3f | %.3f | %s | %.3f | %.3f | %.3f | %.2f |\n",
                      static_cast<long long>(servers), Si(n).c_str(), static_cast<long long>(dim), op.c_str(),
                      a.reps, a.median * 1e3, a.p99 * 1e3, Si(n / a.median).c_str(), value_bytes / a.median / 1e9,
                      b.median * 1e3, value_bytes / b.median / 1e9, b.median / a.median);
          std::fflush(stdout);
        }
      }
      Status st = JobSession(client.get()).Bye();
      if (!st.ok()) std::fprintf(stderr, "tether-bench: %s\n", st.message().c_str());
      for (auto& sh : shards) sh->Stop();
      for (auto& t : threads) t.join();
    }
  }
  return 0;
}

// ------------------------------------------------------------------ updates

struct Stream {
  double copy_gbs = 0, triad_gbs = 0;
};

// STREAM's copy (c = a) and triad (a = b + s·c) on one core (McCalpin 1995),
// counting bytes read + written as STREAM does; median of 5 passes.
Stream ProbeBandwidth(int64_t n) {
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.0f);
  std::vector<double> tc, tt;
  for (int rep = 0; rep < 5; ++rep) {
    double t0 = Now();
    std::memcpy(c.data(), a.data(), n * sizeof(float));
    tc.push_back(Now() - t0);
    const float s = 3.0f;
    float* __restrict pa = a.data();
    const float* __restrict pb = b.data();
    const float* __restrict pc = c.data();
    t0 = Now();
    for (int64_t i = 0; i < n; ++i) pa[i] = pb[i] + s * pc[i];
    tt.push_back(Now() - t0);
  }
  // Keep the work observable.
  volatile float sink = a[n / 2] + c[n / 3];
  (void)sink;
  Stream r;
  r.copy_gbs = 2.0 * n * 4 / Summarize(tc).median / 1e9;
  r.triad_gbs = 3.0 * n * 4 / Summarize(tt).median / 1e9;
  return r;
}

// The last-level cache one core sees, in bytes, and where the figure came
// from. In order: --llc_bytes; sysfs (the highest-level data or unified
// cache of cpu0, /sys/devices/system/cpu/cpu0/cache/index*/{level,type,size});
// sysconf(_SC_LEVEL3_CACHE_SIZE) (glibc reads CPUID; a VM may report the
// whole socket's L3); else kFallbackLlcBytes, said so in the table.
struct LastLevelCache {
  uint64_t bytes = 0;
  std::string source;
};

constexpr uint64_t kFallbackLlcBytes = uint64_t{64} << 20;

LastLevelCache ReadLastLevelCache() {
  LastLevelCache llc;
  if (FLAGS_llc_bytes > 0) {
    llc.bytes = static_cast<uint64_t>(FLAGS_llc_bytes);
    llc.source = "--llc_bytes";
    return llc;
  }
  int best_level = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_file(dir + "level"), type_file(dir + "type"), size_file(dir + "size");
    int level = 0;
    std::string type, size;
    if (!(level_file >> level) || !(type_file >> type) || !(size_file >> size) || type == "Instruction") continue;
    uint64_t bytes = std::strtoull(size.c_str(), nullptr, 10);
    const char unit = size.empty() ? 'B' : size.back();
    if (unit == 'K') bytes <<= 10;
    if (unit == 'M') bytes <<= 20;
    if (unit == 'G') bytes <<= 30;
    if (level > best_level && bytes > 0) {
      best_level = level;
      llc.bytes = bytes;
      llc.source = "sysfs, cpu0 L" + std::to_string(level) + " " + type;
    }
  }
  if (llc.bytes > 0) return llc;
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0) {
    llc.bytes = static_cast<uint64_t>(l3);
    llc.source = "sysconf(_SC_LEVEL3_CACHE_SIZE)";
    return llc;
  }
  llc.bytes = kFallbackLlcBytes;
  llc.source = "fallback: neither sysfs nor sysconf gave a size";
  return llc;
}

int RunUpdates() {
  const std::vector<int64_t> dims = ParseList(FLAGS_dims.empty() ? "64,256" : FLAGS_dims);
  const std::vector<std::string> names = ParseNames(FLAGS_optimizers);
  const LastLevelCache llc = ReadLastLevelCache();
  const double target_bytes = FLAGS_llc_multiple * static_cast<double>(llc.bytes);
  std::printf("## Server updates on one core vs memory bandwidth\n\n");
  std::printf("Last-level cache %.1f MiB (%s); each cell's table has at least %s rows and enough that its rows'\n"
              "weights and state (the working set) are at least %.3g × the LLC = %.1f MiB. Each push is %lld\n"
              "sorted unique rows; the pushes walk a random permutation of all rows, so every row is touched\n"
              "once per pass. `table` is ServerTable::PushRows (row lookup, optimizer step, finiteness check).\n"
              "`bare` is Optimizer::Apply alone on a plain array of the same rows (huge pages, hinted two rows\n"
              "ahead, no lookup, no check): `scattered` in the table path's order, the most that path could\n"
              "reach here; `in order` the same rows one after another, so the two differ by what scattering\n"
              "costs the memory system. GB/s counts the bytes an update must move: weights and state read\n"
              "and written, the gradient read. `÷ triad` = GB/s over the STREAM triad probe of the same run\n"
              "(probed before and after; the mean is used).\n\n",
              llc.bytes / 1048576.0, llc.source.c_str(), Si(static_cast<double>(FLAGS_rows)).c_str(),
              FLAGS_llc_multiple, target_bytes / 1048576.0, static_cast<long long>(FLAGS_batch));
  std::fflush(stdout);
  // STREAM's rule: each array at least 4× the cache, or the probe measures
  // the cache and the ratios against it mean nothing.
  const int64_t stream_floats =
      std::max<int64_t>(FLAGS_stream_floats, static_cast<int64_t>(std::ceil(target_bytes / sizeof(float))));
  std::printf("Bandwidth probe arrays: 3 × %.1f MiB.\n\n", stream_floats * 4 / 1048576.0);
  const Stream before = ProbeBandwidth(stream_floats);
  std::mt19937_64 rng(42);
  struct Row {
    std::string opt;
    int64_t dim, rows;
    double working_set_bytes;
    double table_rows_s, scattered_rows_s, in_order_rows_s;  // rows/s
  };
  std::vector<Row> results;
  for (const std::string& name : names) {
    OptimizerConfig oc;
    if (name == "sgd") {
      oc.set_type(SGD);
    } else if (name == "adagrad") {
      oc.set_type(ADAGRAD);
    } else if (name == "adam") {
      oc.set_type(ADAM);
    } else {
      std::fprintf(stderr, "tether-bench: unknown optimizer %s in --optimizers (sgd, adagrad, adam)\n", name.c_str());
      return 2;
    }
    oc.set_learning_rate(1e-4f);
    const Optimizer optimizer(oc);
    for (int64_t dim : dims) {
      TableSpec spec;
      spec.set_id(0);
      spec.set_name("w");
      spec.set_kind(TableSpec::ROW);
      spec.set_dim(static_cast<uint32_t>(dim));
      spec.mutable_init()->set_kind(TableInitializer::UNIFORM);
      spec.mutable_init()->set_bound(0.01f);
      spec.mutable_init()->set_seed(1);
      *spec.mutable_optimizer() = oc;
      ServerTable table(spec, 0, 0);
      const uint64_t state = optimizer.StateFloats(dim);
      const double resident_row_bytes = (dim + state) * 4.0;
      const int64_t rows =
          std::max<int64_t>(FLAGS_rows, static_cast<int64_t>(std::ceil(target_bytes / resident_row_bytes)));
      const int64_t batch = std::max<int64_t>(1, std::min<int64_t>(FLAGS_batch, rows));
      {  // Touch every row once (creation is not what is measured).
        std::vector<uint64_t> all(std::min<int64_t>(rows, 65536));
        std::vector<float> sink(all.size() * dim);
        for (int64_t b = 0; b < rows; b += static_cast<int64_t>(all.size())) {
          const int64_t e = std::min<int64_t>(rows, b + static_cast<int64_t>(all.size()));
          for (int64_t i = b; i < e; ++i) all[i - b] = static_cast<uint64_t>(i);
          (void)table.PullRows(all.data(), e - b, sink.data());  // far below the row limit
        }
      }
      // Pushes: a random permutation of every row, cut into sorted batches,
      // so a pass reuses nothing a cache could keep.
      std::vector<uint64_t> perm(static_cast<size_t>(rows));
      for (int64_t i = 0; i < rows; ++i) perm[i] = static_cast<uint64_t>(i);
      std::shuffle(perm.begin(), perm.end(), rng);
      const int64_t num_batches = rows / batch;
      for (int64_t b = 0; b < num_batches; ++b) std::sort(perm.begin() + b * batch, perm.begin() + (b + 1) * batch);
      std::vector<float> g(batch * dim);
      std::normal_distribution<float> normal(0.0f, 1e-3f);
      for (float& x : g) x = normal(rng);
      // Table path.
      int64_t done = 0;
      double t0 = Now(), elapsed = 0;
      for (int64_t i = 0; elapsed < FLAGS_min_time_s || i < FLAGS_min_reps; ++i) {
        const uint64_t* ks = perm.data() + (i % num_batches) * batch;
        (void)table.PushRows(ks, batch, g.data());
        done += batch;
        elapsed = Now() - t0;
      }
      const double table_rows_s = done / elapsed;
      // The bare step: Optimizer::Apply on the same rows of a plain array
      // laid out as the table's ([w | state] a row, on huge pages), with
      // no lookup and no finiteness check, rows hinted two ahead as the
      // table does. Scattered: in the table path's order, so it is the
      // most the table path could reach on this machine. In order: the same
      // rows one after another, so the gap between the two is what
      // scattering the rows costs the memory system (translation and DRAM
      // pages), not the step's arithmetic.
      const uint64_t stride = dim + state;
      std::vector<float, table_internal::HugePageAllocator<float>> plain(static_cast<size_t>(rows * stride), 0.01f);
      for (int64_t r = 0; r < rows; ++r) optimizer.InitState(plain.data() + r * stride + dim, dim);
      const auto bare_rows_s = [&](const std::vector<uint64_t>& order) {
        constexpr int64_t kAhead = 2;
        const uint64_t lines = (stride * sizeof(float) + 63) / 64;
        int64_t rows_done = 0;
        const double start = Now();
        double taken = 0;
        for (int64_t i = 0; taken < FLAGS_min_time_s || i < FLAGS_min_reps; ++i) {
          const uint64_t* ks = order.data() + (i % num_batches) * batch;
          for (int64_t j = 0; j < batch; ++j) {
            if (j + kAhead < batch) {
              const char* next = reinterpret_cast<const char*>(plain.data() + ks[j + kAhead] * stride);
              for (uint64_t l = 0; l < lines; ++l) HintWrite(next + l * 64);
            }
            float* row = plain.data() + ks[j] * stride;
            (void)optimizer.Apply(row, row + dim, g.data() + j * dim, dim);
          }
          rows_done += batch;
          taken = Now() - start;
        }
        return rows_done / taken;
      };
      const double scattered_rows_s = bare_rows_s(perm);
      std::vector<uint64_t> in_order(perm.size());
      for (size_t i = 0; i < in_order.size(); ++i) in_order[i] = i;
      const double in_order_rows_s = bare_rows_s(in_order);
      results.push_back({name, dim, rows, rows * resident_row_bytes, table_rows_s, scattered_rows_s, in_order_rows_s});
    }
  }
  const Stream after = ProbeBandwidth(stream_floats);
  const double copy = 0.5 * (before.copy_gbs + after.copy_gbs);
  const double triad = 0.5 * (before.triad_gbs + after.triad_gbs);
  std::printf("Bandwidth probe (one core): copy %.2f GB/s (%.2f before, %.2f after), triad %.2f GB/s (%.2f, %.2f)\n\n",
              copy, before.copy_gbs, after.copy_gbs, triad, before.triad_gbs, after.triad_gbs);
  std::printf("| optimizer | dim | bytes/row | rows | working set MiB | ÷ LLC | table rows/s | table GB/s | ÷ triad "
              "| bare scattered rows/s | ÷ triad | bare in order rows/s | ÷ triad | table ÷ bare scattered |\n");
  std::printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : results) {
    OptimizerConfig oc;
    oc.set_type(r.opt == "sgd" ? SGD : r.opt == "adagrad" ? ADAGRAD : ADAM);
    const double bytes_per_row = (2.0 * (r.dim + Optimizer(oc).StateFloats(r.dim)) + r.dim) * 4;
    const auto of_triad = [&](double rows_s) { return rows_s * bytes_per_row / 1e9 / triad; };
    std::printf("| %s | %lld | %.0f | %s | %.0f | %.1f | %s | %.2f | %.2f | %s | %.2f | %s | %.2f | %.2f |\n",
                r.opt.c_str(), static_cast<long long>(r.dim), bytes_per_row, Si(static_cast<double>(r.rows)).c_str(),
                r.working_set_bytes / 1048576.0, r.working_set_bytes / llc.bytes, Si(r.table_rows_s).c_str(),
                r.table_rows_s * bytes_per_row / 1e9, of_triad(r.table_rows_s), Si(r.scattered_rows_s).c_str(),
                of_triad(r.scattered_rows_s), Si(r.in_order_rows_s).c_str(), of_triad(r.in_order_rows_s),
                r.table_rows_s / r.scattered_rows_s);
  }
  return 0;
}

// ------------------------------------------------------------------ kv

// The worker side of scripts/bench_pslite.sh against a tether-server
// started apart (one shard, one worker, ASP, no cache, so every request
// crosses the wire): one ROW table per distinct dim of --shapes, any uint64
// key, zeros at start, SGD (lr 1e-6) or NOOP. Per shape: one untimed push
// and pull (creates the rows, fills the frame pools), then timed pushes
// (PushRows + WaitAll: applied and acknowledged) and pulls alternately, as
// kv_bench.cc times ps-lite. Prints "RESULT keys dim push_ms pull_ms reps"
// lines (medians) for the script to merge, then says BYE (the server exits).
int RunKv() {
  if (FLAGS_server.empty()) {
    std::fprintf(stderr, "tether-bench kv: --server=ENDPOINT (a running tether-server) is required\n");
    return 2;
  }
  OptimizerType type;
  if (FLAGS_optimizer == "sgd") {
    type = SGD;
  } else if (FLAGS_optimizer == "noop") {
    type = NOOP;
  } else {
    std::fprintf(stderr, "tether-bench kv: unknown --optimizer=%s (sgd, noop)\n", FLAGS_optimizer.c_str());
    return 2;
  }
  std::vector<std::pair<int64_t, int64_t>> shapes;
  if (!ParseShapes("kv", &shapes)) return 2;
  ClientOptions copts;
  copts.servers = {FLAGS_server};
  copts.staleness = -1;
  copts.job_id = FLAGS_job_id;
  copts.request_timeout_ms = 120000;
  copts.key_lists = FLAGS_key_list_cache;
  if (FLAGS_chunk_bytes > 0) copts.max_message_bytes = static_cast<uint64_t>(FLAGS_chunk_bytes);
  if (FLAGS_max_outstanding > 0) copts.max_outstanding = FLAGS_max_outstanding;
  if (!FLAGS_client_key_file.empty() || !FLAGS_server_public_key_file.empty()) {
    CurveConfig curve;
    curve.set_client_secret_key_file(FLAGS_client_key_file);
    curve.set_server_public_key_file(FLAGS_server_public_key_file);
    auto keys = CurveClientOptions(curve);
    if (!keys.ok()) {
      std::fprintf(stderr, "tether-bench kv: %s\n", keys.status().message().c_str());
      return 2;
    }
    copts.curve = *keys;
  }
  std::vector<int64_t> table_dims;
  for (const auto& shape : shapes) {
    const int64_t dim = shape.second;
    if (std::find(table_dims.begin(), table_dims.end(), dim) != table_dims.end()) continue;
    TableSpec spec;
    spec.set_id(static_cast<uint32_t>(table_dims.size()));
    spec.set_name("d" + std::to_string(dim));
    spec.set_kind(TableSpec::ROW);
    spec.set_dim(static_cast<uint32_t>(dim));
    spec.mutable_init()->set_kind(TableInitializer::ZEROS);
    spec.mutable_optimizer()->set_type(type);
    spec.mutable_optimizer()->set_learning_rate(1e-6f);
    spec.mutable_consistency()->set_model(ASP);
    spec.mutable_consistency()->set_staleness(-1);
    spec.mutable_consistency()->set_cache(false);
    copts.tables.push_back(spec);
    table_dims.push_back(dim);
  }
  auto client_or = WorkerClient::Connect(copts);
  if (!client_or.ok()) {
    std::fprintf(stderr, "tether-bench kv: %s\n", client_or.status().message().c_str());
    return 1;
  }
  std::unique_ptr<WorkerClient> client = std::move(*client_or);
  std::printf("READY\n");
  std::fflush(stdout);
  for (const auto& [n, dim] : shapes) {
    const uint32_t table = static_cast<uint32_t>(
        std::find(table_dims.begin(), table_dims.end(), dim) - table_dims.begin());
    const std::vector<uint64_t> keys = RandomSortedKeys(n, FLAGS_key_seed);
    const size_t num_values = static_cast<size_t>(n * dim);
    std::vector<float> push_vals, pull_vals(num_values);
    // The same gradient every push: filled once, as kv_bench.cc fills its
    // SArray, and sent by reference unless --push_copy.
    PushValues shared;
    if (FLAGS_push_copy) {
      push_vals.assign(num_values, static_cast<float>(FLAGS_push_value));
    } else {
      shared = client->NewPushValues(num_values);
      std::fill(shared.data(), shared.data() + num_values, static_cast<float>(FLAGS_push_value));
    }
    auto push = [&]() -> Status {
      if (FLAGS_push_copy)
        client->PushRows(table, keys, push_vals.data());
      else
        client->PushRows(table, keys, shared);
      return client->WaitAll();
    };
    auto pull = [&]() -> Status { return client->PullRows(table, keys, pull_vals.data()).Wait(); };
    Status st = push();
    if (st.ok()) st = pull();
    std::vector<double> t_push, t_pull;
    const double start = Now();
    while (st.ok() && static_cast<int>(t_push.size()) < FLAGS_max_reps &&
           (static_cast<int>(t_push.size()) < FLAGS_min_reps || Now() - start < 2 * FLAGS_min_time_s)) {
      double t0 = Now();
      st = push();
      t_push.push_back(Now() - t0);
      if (!st.ok()) break;
      t0 = Now();
      st = pull();
      t_pull.push_back(Now() - t0);
    }
    if (!st.ok()) {
      std::fprintf(stderr, "tether-bench kv: %lld x %lld: %s\n", static_cast<long long>(n),
                   static_cast<long long>(dim), st.message().c_str());
      return 1;
    }
    std::printf("RESULT %lld %lld %.4f %.4f %d\n", static_cast<long long>(n), static_cast<long long>(dim),
                Summarize(t_push).median * 1e3, Summarize(t_pull).median * 1e3, static_cast<int>(t_push.size()));
    std::fflush(stdout);
  }
  const Status bye = JobSession(client.get()).Bye();
  if (!bye.ok()) {
    std::fprintf(stderr, "tether-bench kv: %s\n", bye.message().c_str());
    return 1;
  }
  return 0;
}

// ------------------------------------------------------------------ order

int RunOrder() {
  if (FLAGS_order_rows <= 0) {
    std::fprintf(stderr, "tether-bench order: --order_rows=N (rows in the worker's partition) is required\n");
    return 2;
  }
  std::vector<int64_t> order;
  std::string line;
  for (int e = 0; e < FLAGS_epochs; ++e) {
    EpochOrder(FLAGS_seed, FLAGS_rank, e, FLAGS_order_rows, &order);
    line.clear();
    for (size_t i = 0; i < order.size(); ++i) {
      if (i > 0) line += ' ';
      line += std::to_string(order[i]);
    }
    std::printf("%s\n", line.c_str());
  }
  return 0;
}


// tether-bench checkpoint: writes and loads an XMC-MLP-shaped model (Adam
// state included) through checkpoint/checkpoint.h, against dd's sequential
// write speed to the same directory, measured in the same run.
double RunDd(const std::string& dir, uint64_t bytes) {
  const uint64_t mib = std::max<uint64_t>(1, bytes >> 20);
  const std::string file = dir + "/dd.bin";
  const std::string cmd = "dd if=/dev/zero of='" + file + "' bs=1M count=" + std::to_string(mib) +
                          " conv=fsync 2>/dev/null";
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = std::system(cmd.c_str());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::remove(file.c_str());
  if (rc != 0) return 0;
  return static_cast<double>(mib << 20) / s;
}

int RunCheckpoint() {
  std::string dir = FLAGS_ckpt_dir;
  if (dir.empty()) {
    const char* t = std::getenv("TMPDIR");
    dir = std::string(t != nullptr && *t ? t : "/tmp") + "/tether-bench-checkpoint." + std::to_string(getpid());
  }
  if (Status st = FileSystem::Default()->CreateDirs(dir); !st.ok()) {
    std::fprintf(stderr, "tether-bench checkpoint: %s\n", st.message().c_str());
    return 1;
  }
  const uint32_t h = static_cast<uint32_t>(FLAGS_ckpt_hidden);
  OptimizerConfig adam;
  adam.set_type(ADAM);
  auto row = [&](uint32_t id, const std::string& name, uint64_t keys) {
    TableSpec t;
    t.set_id(id);
    t.set_name(name);
    t.set_kind(TableSpec::ROW);
    t.set_dim(h);
    t.set_num_keys(keys);
    t.mutable_init()->set_kind(TableInitializer::UNIFORM);
    t.mutable_init()->set_bound(0.05f);
    *t.mutable_optimizer() = adam;
    return t;
  };
  auto dense = [&](uint32_t id, const std::string& name, uint64_t size) {
    TableSpec t;
    t.set_id(id);
    t.set_name(name);
    t.set_kind(TableSpec::DENSE);
    t.set_size(size);
    *t.mutable_optimizer() = adam;
    return t;
  };
  const std::vector<TableSpec> specs = {row(0, "w1", FLAGS_ckpt_features), dense(1, "b1", h),
                                        row(2, "w2", FLAGS_ckpt_labels), dense(3, "b2", FLAGS_ckpt_labels)};
  const int n = FLAGS_ckpt_servers;
  auto make = [&](int shard, int shards) {
    std::vector<std::unique_ptr<ServerTable>> tables;
    for (const TableSpec& t : specs) {
      uint64_t b = 0, e = 0;
      if (IsDenseTable(t)) std::tie(b, e) = DenseRange(t.size(), shard, shards);
      tables.push_back(std::make_unique<ServerTable>(t, b, e));
    }
    return tables;
  };
  std::printf("## Checkpoint write and load: %lld features, %lld labels, hidden %u, Adam\n\n",
              static_cast<long long>(FLAGS_ckpt_features), static_cast<long long>(FLAGS_ckpt_labels), h);
  std::fflush(stdout);
  // Every row touched once (created with its initializer), as after an epoch.
  std::vector<std::vector<std::unique_ptr<ServerTable>>> shards;
  for (int s = 0; s < n; ++s) shards.push_back(make(s, n));
  for (const uint32_t id : {0u, 2u}) {
    const uint64_t keys = specs[id].num_keys();
    std::vector<std::vector<uint64_t>> mine(n);
    for (uint64_t k = 0; k < keys; ++k) mine[ShardForKey(k, n)].push_back(k);
    std::vector<float> out;
    for (int s = 0; s < n; ++s) {
      for (size_t b = 0; b < mine[s].size(); b += 8192) {
        const size_t e = std::min(mine[s].size(), b + 8192);
        out.resize((e - b) * h);
        (void)shards[s][id]->PullRows(mine[s].data() + b, e - b, out.data());
      }
    }
  }
  CheckpointManifest m;
  m.set_format_version(kCheckpointFormatVersion);
  m.set_job_id("tether-bench");
  m.set_clock(1);
  m.set_num_servers(n);
  m.set_num_workers(1);
  for (const TableSpec& t : specs) *m.add_tables() = t;
  const std::string ckpt = dir + "/" + CheckpointDirName(1, false);
  std::vector<CheckpointFile> files(n);
  std::vector<Status> status(n);
  auto t0 = std::chrono::steady_clock::now();
  {
    std::vector<std::thread> threads;
    for (int s = 0; s < n; ++s)
      threads.emplace_back([&, s] {
        status[s] = WriteShardCheckpoint(FileSystem::Default(), ckpt, s, n, 1, shards[s], &files[s]);
      });
    for (auto& t : threads) t.join();
  }
  const double write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  uint64_t bytes = 0;
  for (int s = 0; s < n; ++s) {
    if (!status[s].ok()) {
      std::fprintf(stderr, "tether-bench checkpoint: %s\n", status[s].message().c_str());
      return 1;
    }
    bytes += files[s].bytes();
    *m.add_files() = files[s];
  }
  if (Status st = WriteManifest(FileSystem::Default(), ckpt, m); !st.ok()) {
    std::fprintf(stderr, "tether-bench checkpoint: %s\n", st.message().c_str());
    return 1;
  }
  shards.clear();  // free the model before loading it back
  const double dd_bps = RunDd(dir, bytes);
  auto load = [&](int shards_now, double* seconds) -> Status {
    std::vector<std::vector<std::unique_ptr<ServerTable>>> back;
    for (int s = 0; s < shards_now; ++s) back.push_back(make(s, shards_now));
    std::vector<Status> st(shards_now);
    const auto l0 = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int s = 0; s < shards_now; ++s)
      threads.emplace_back([&, s] { st[s] = RestoreShardTables(ckpt, m, s, shards_now, &back[s]); });
    for (auto& t : threads) t.join();
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - l0).count();
    for (const Status& x : st) TETHER_RETURN_IF_ERROR(x);
    return Status::OK();
  };
  double load_same = 0, load_other = 0;
  if (Status st = load(FLAGS_ckpt_load_servers, &load_other); !st.ok()) {
    std::fprintf(stderr, "tether-bench checkpoint: %s\n", st.message().c_str());
    return 1;
  }
  if (Status st = load(n, &load_same); !st.ok()) {
    std::fprintf(stderr, "tether-bench checkpoint: %s\n", st.message().c_str());
    return 1;
  }
  (void)FileSystem::Default()->RemoveAll(dir);
  const double gb = static_cast<double>(bytes) / 1e9;
  std::printf("Checkpoint of %d shard(s): %.2f GB in %d file(s), under %s.\n"
              "Write: every shard in its own thread (as servers on one host), fsync and rename included.\n"
              "Load: XXH3-64 checked while reading; the files are likely still in the page cache.\n"
              "dd: `dd if=/dev/zero bs=1M conv=fsync` of the same size to the same directory, same run.\n\n",
              n, gb, n, dir.c_str());
  std::printf("| operation | shards | GB | seconds | GB/s | vs dd |\n|---|---:|---:|---:|---:|---:|\n");
  const double dd = dd_bps / 1e9;
  std::printf("| dd sequential write | 1 | %.2f | %.2f | %.2f | 1.00 |\n", gb, dd > 0 ? gb / dd : 0.0, dd);
  std::printf("| write checkpoint | %d | %.2f | %.2f | %.2f | %.2f |\n", n, gb, write_s, gb / write_s,
              dd > 0 ? gb / write_s / dd : 0.0);
  std::printf("| load, same shards | %d | %.2f | %.2f | %.2f | %.2f |\n", n, gb, load_same, gb / load_same,
              dd > 0 ? gb / load_same / dd : 0.0);
  std::printf("| load, re-sharded | %d | %.2f | %.2f | %.2f | %.2f |\n", FLAGS_ckpt_load_servers,
              gb * FLAGS_ckpt_load_servers, load_other, gb * FLAGS_ckpt_load_servers / load_other,
              dd > 0 ? gb * FLAGS_ckpt_load_servers / load_other / dd : 0.0);
  std::printf("\n(A re-sharded load reads every shard file on every new shard: %d × the bytes.)\n",
              FLAGS_ckpt_load_servers);
  return 0;
}


// ---- rendezvous ----------------------------------------------------------------

DEFINE_string(rdzv_procs, "2,16,64", "rendezvous: process counts N to measure (S = max(1, N/8) servers)");
DEFINE_int32(rdzv_reps, 5, "rendezvous: repetitions per (backend, N); the median is reported");
DEFINE_string(rdzv_dir, "", "rendezvous: parent of the file backend's directory (default $TMPDIR or /tmp)");

int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// One round: N forked processes wait on `go`, then servers publish and
// workers look every server up ("none": they only exit). Returns the time
// from release to the last process done, in ms (-1: a process failed).
double RendezvousRound(const std::string& backend, const std::string& spec, int n, int s, int rep) {
  int go[2], done[2];
  if (pipe(go) != 0 || pipe(done) != 0) return -1;
  std::vector<pid_t> kids;
  const std::string job = "bench-" + std::to_string(getpid()) + "-" + std::to_string(n) + "-" + std::to_string(rep);
  for (int i = 0; i < n; ++i) {
    const pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
      close(go[1]);
      close(done[0]);
      char c;
      if (read(go[0], &c, 1) < 0) _exit(3);  // EOF: released
      int rc = 0;
      if (backend != "none") {
        auto r = Rendezvous::Open(spec);
        if (!r.ok()) _exit(4);
        if (i < s) {
          rc = PublishServer(r->get(), job, 0, i, "tcp://10.0.0." + std::to_string(i) + ":5000", 30000).ok() ? 0 : 5;
        } else {
          auto got = LookupServers(r->get(), job, 0, s, 30000, nullptr);
          rc = got.ok() && static_cast<int>(got->size()) == s ? 0 : 6;
        }
      }
      const int64_t t = MonotonicNs();
      if (write(done[1], &t, sizeof(t)) != static_cast<ssize_t>(sizeof(t))) _exit(7);
      _exit(rc);
    }
    kids.push_back(pid);
  }
  close(go[0]);
  close(done[1]);
  const int64_t start = MonotonicNs();
  close(go[1]);  // release every process at once
  int64_t last = start;
  int64_t t = 0;
  while (read(done[0], &t, sizeof(t)) == static_cast<ssize_t>(sizeof(t))) last = std::max(last, t);
  close(done[0]);
  bool ok = true;
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    ok = ok && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  }
  return ok ? static_cast<double>(last - start) / 1e6 : -1;
}

int RunRendezvous() {
  std::vector<int> counts;
  {
    std::stringstream ss(FLAGS_rdzv_procs);
    std::string item;
    while (std::getline(ss, item, ',')) {
      const int n = std::atoi(item.c_str());
      if (n < 2) {
        std::fprintf(stderr, "tether-bench rendezvous: --rdzv_procs: '%s' is not a count ≥ 2\n", item.c_str());
        return 2;
      }
      counts.push_back(n);
    }
  }
  if (FLAGS_rdzv_reps < 1) {
    std::fprintf(stderr, "tether-bench rendezvous: --rdzv_reps must be ≥ 1\n");
    return 2;
  }
  const char* tmpdir = std::getenv("TMPDIR");
  std::string parent = !FLAGS_rdzv_dir.empty() ? FLAGS_rdzv_dir : (tmpdir != nullptr && *tmpdir ? tmpdir : "/tmp");
  std::string dir = parent + "/tether-bench-rdzv.XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    std::fprintf(stderr, "tether-bench rendezvous: cannot create a directory under %s: %s\n", parent.c_str(),
                 std::strerror(errno));
    return 1;
  }
  // The store runs in a process of its own, forked before this process
  // makes any ZeroMQ context (a context must not cross a fork).
  int port_pipe[2];
  if (pipe(port_pipe) != 0) return 1;
  const pid_t store_pid = fork();
  if (store_pid == 0) {
    close(port_pipe[0]);
    RendezvousStore store;
    if (!store.Start("tcp://127.0.0.1:0").ok()) _exit(1);
    char buf[128] = {0};
    std::snprintf(buf, sizeof(buf), "%s", store.endpoint().c_str());
    if (write(port_pipe[1], buf, sizeof(buf)) != static_cast<ssize_t>(sizeof(buf))) _exit(1);
    close(port_pipe[1]);
    pause();  // until SIGTERM
    _exit(0);
  }
  close(port_pipe[1]);
  char buf[128] = {0};
  if (store_pid < 0 || read(port_pipe[0], buf, sizeof(buf)) != static_cast<ssize_t>(sizeof(buf))) {
    std::fprintf(stderr, "tether-bench rendezvous: the store did not start\n");
    return 1;
  }
  close(port_pipe[0]);
  const std::string store_spec = buf;

  std::printf("Rendezvous: N processes released at once; S = max(1, N/8) publish one endpoint each, the other\n"
              "N - S look all S up. Time: release to the last process done (median of %d). Baseline: the same\n"
              "processes doing no rendezvous. Directory: %s (local disk). Store: %s, its own process.\n\n",
              FLAGS_rdzv_reps, dir.c_str(), store_spec.c_str());
  std::printf("| backend | N | servers | workers | ms (median) | ms (min) | ms over baseline |\n"
              "|---|---:|---:|---:|---:|---:|---:|\n");
  int status = 0;
  for (int n : counts) {
    const int s = std::max(1, n / 8);
    double baseline = 0;
    for (const std::string backend : {"none", "file", "store"}) {
      std::vector<double> ms;
      for (int rep = 0; rep < FLAGS_rdzv_reps; ++rep) {
        const std::string spec = backend == "store" ? store_spec : "file:" + dir + "/" + std::to_string(rep);
        const double t = RendezvousRound(backend, spec, n, s, rep);
        if (t < 0) {
          std::fprintf(stderr, "tether-bench rendezvous: a process failed (%s, N = %d)\n", backend.c_str(), n);
          status = 1;
          break;
        }
        ms.push_back(t);
      }
      if (ms.empty()) continue;
      std::sort(ms.begin(), ms.end());
      const double median = ms[ms.size() / 2];
      if (backend == "none") baseline = median;
      std::printf("| %s | %d | %d | %d | %.1f | %.1f | %s |\n",
                  backend == "none" ? "none (baseline)" : backend == "file" ? "file:DIR" : "store tcp://",
                  n, s, n - s, median, ms.front(),
                  backend == "none" ? "—" : (std::to_string(static_cast<int>(std::lround(median - baseline)))).c_str());
    }
  }
  kill(store_pid, SIGTERM);
  waitpid(store_pid, nullptr, 0);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return status;
}

}  // namespace
}  // namespace tether

int main(int argc, char** argv) {
  tether::ParseFlagsOrDie(
      &argc, &argv,
      {"tether-bench transport|updates|kv|order|checkpoint|rendezvous [flags]\n"
       "  transport  push/pull over loopback vs raw ZeroMQ (--keys, --dims, --servers, --ops); with --curve:\n"
       "             CURVE on vs off over the --shapes request shapes\n"
       "  kv         push/pull shapes against a running tether-server (--server, --shapes, --optimizer;\n"
       "             scripts/bench_pslite.sh runs it alternately with ps-lite)\n"
       "  updates    server optimizers on one core vs a memory-bandwidth probe (--rows, --dims, --optimizers)\n"
       "  order      a worker's per-epoch row order (--order_rows, --seed, --rank, --epochs)\n"
       "  checkpoint write and load an XMC-shaped model's checkpoint vs dd (--ckpt_features, --ckpt_labels,\n"
       "             --ckpt_hidden, --ckpt_servers, --ckpt_load_servers, --ckpt_dir)\n"
       "  rendezvous N processes publish and look up endpoints, directory vs store backends\n"
       "             (--rdzv_procs, --rdzv_reps, --rdzv_dir)",
       {"COMMAND"}});
  gflags::CommandLineFlagInfo level;
  if (gflags::GetCommandLineFlagInfo("minloglevel", &level) && level.is_default) {
    FLAGS_minloglevel = 1;  // keep the tables readable; --minloglevel=0 shows INFO
  }
  const std::string cmd = argv[1];
  if (cmd == "transport") return tether::RunTransport();
  if (cmd == "updates") return tether::RunUpdates();
  if (cmd == "kv") return tether::RunKv();
  if (cmd == "order") return tether::RunOrder();
  if (cmd == "rendezvous") return tether::RunRendezvous();
  if (cmd == "checkpoint") return tether::RunCheckpoint();
  std::fprintf(stderr, "tether-bench: unknown command '%s'\n%s\n", cmd.c_str(), gflags::ProgramUsage());
  return 2;
}
