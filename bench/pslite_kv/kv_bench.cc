// ps-lite's side of scripts/bench_pslite.sh: one program that is, by
// ps-lite's environment variables (DMLC_ROLE and the rest), its scheduler,
// a server, or the worker that times pushes and pulls. Built by the script
// against a ps-lite source snapshot outside Tether's CMake build (ps-lite is
// not a dependency of Tether; scripts/bench_pslite.sh builds it).
//
//   kv_bench SHAPES MIN_REPS MAX_REPS MIN_TIME_S SEED
//
// SHAPES is "KEYSxDIM,KEYSxDIM,..." (1x1,100000x1,...). The server answers
// with an empty handler, as ps-lite's own benchmark does: a push is
// acknowledged and dropped, a pull answered from a reused zero buffer of
// keys × dim floats (the request's `cmd` carries dim). The worker, for each
// shape, draws KEYS random sorted unique uint64 keys from mt19937_64(SEED)
// (tether-bench kv draws the same ones), sends one untimed push and pull,
// then alternates timed pushes (ZPush + Wait) and pulls (ZPull + Wait), one
// request in flight, at least MIN_REPS of each and for MIN_TIME_S seconds,
// at most MAX_REPS; it prints, per shape, one line to stdout:
//
//   RESULT keys dim push_median_ms pull_median_ms reps
//
// and "READY" once ps-lite has started (before the first request), so the
// script can tell a start-up failure (retried) from a failed measurement.
// Single-threaded apart from ps-lite's own threads; exits 0 on success, 2 on
// bad arguments.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ps/ps.h"

#include "bench/random_keys.h"

namespace {

using tether::RandomSortedKeys;

struct Shape {
  int64_t keys = 0;
  int dim = 0;
};

bool ParseShapes(const std::string& s, std::vector<Shape>* out) {
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t x = item.find('x');
    if (x == std::string::npos) return false;
    Shape shape;
    shape.keys = static_cast<int64_t>(std::stod(item.substr(0, x)));
    shape.dim = std::stoi(item.substr(x + 1));
    if (shape.keys < 1 || shape.dim < 1) return false;
    out->push_back(shape);
  }
  return !out->empty();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Server: reused reply buffers per request size, as ps-lite's benchmark
// reuses its reply; only ps-lite's receive thread calls this.
std::unordered_map<size_t, ps::KVPairs<float>> g_replies;

void EmptyHandler(const ps::KVMeta& meta, const ps::KVPairs<float>& req, ps::KVServer<float>* server) {
  if (meta.push) {
    server->Response(meta, ps::KVPairs<float>());
    return;
  }
  const size_t n = req.keys.size() * static_cast<size_t>(std::max(1, meta.cmd));
  ps::KVPairs<float>& reply = g_replies[n];
  reply.keys = req.keys;
  reply.vals.resize(n);
  server->Response(meta, reply);
}

int RunWorker(const std::vector<Shape>& shapes, int min_reps, int max_reps, double min_time_s, uint64_t seed) {
  ps::KVWorker<float> kv(0, 0);
  std::printf("READY\n");
  std::fflush(stdout);
  for (const Shape& shape : shapes) {
    const std::vector<uint64_t> k = RandomSortedKeys(shape.keys, seed);
    ps::SArray<ps::Key> keys(k.size());
    std::copy(k.begin(), k.end(), keys.begin());
    ps::SArray<float> push_vals(k.size() * shape.dim, 0.5f);
    ps::SArray<float> pull_vals(k.size() * shape.dim, 0.0f);
    kv.Wait(kv.ZPush(keys, push_vals, {}, shape.dim));
    kv.Wait(kv.ZPull(keys, &pull_vals, nullptr, shape.dim));
    std::vector<double> t_push, t_pull;
    const double start = Now();
    while (static_cast<int>(t_push.size()) < max_reps &&
           (static_cast<int>(t_push.size()) < min_reps || Now() - start < 2 * min_time_s)) {
      double t0 = Now();
      kv.Wait(kv.ZPush(keys, push_vals, {}, shape.dim));
      t_push.push_back(Now() - t0);
      t0 = Now();
      kv.Wait(kv.ZPull(keys, &pull_vals, nullptr, shape.dim));
      t_pull.push_back(Now() - t0);
    }
    std::printf("RESULT %lld %d %.4f %.4f %zu\n", static_cast<long long>(shape.keys), shape.dim,
                Median(t_push) * 1e3, Median(t_pull) * 1e3, t_push.size());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape> shapes;
  if (argc != 6 || !ParseShapes(argv[1], &shapes)) {
    std::fprintf(stderr, "usage: %s KEYSxDIM[,...] MIN_REPS MAX_REPS MIN_TIME_S SEED (ps-lite's DMLC_* in the env)\n",
                 argv[0]);
    return 2;
  }
  const int min_reps = std::atoi(argv[2]);
  const int max_reps = std::atoi(argv[3]);
  const double min_time_s = std::atof(argv[4]);
  const uint64_t seed = std::strtoull(argv[5], nullptr, 10);
  ps::Start(0);
  ps::KVServer<float>* server = nullptr;
  if (ps::IsServer()) {
    server = new ps::KVServer<float>(0);
    server->set_request_handle(EmptyHandler);
  }
  int rc = 0;
  if (ps::IsWorker()) rc = RunWorker(shapes, min_reps, max_reps, min_time_s, seed);
  ps::Finalize(0, true);
  delete server;
  return rc;
}
