#include "bench/checkpoint_bench.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <tuple>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "core/env.h"
#include "core/partition.h"
#include "core/table_spec.h"
#include "server/table.h"
#include "server/table_checkpoint.h"

namespace tether {
namespace {

using ShardTables = std::vector<std::unique_ptr<ServerTable>>;

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// dd's sequential write of `bytes` (whole MiB, at least one) to `dir`, in
// bytes per second; 0 when dd failed.
double RunDd(const std::string& dir, uint64_t bytes) {
  const uint64_t mib = std::max<uint64_t>(1, bytes >> 20);
  const std::string file = dir + "/dd.bin";
  const std::string cmd = "dd if=/dev/zero of='" + file + "' bs=1M count=" + std::to_string(mib) +
                          " conv=fsync 2>/dev/null";
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = std::system(cmd.c_str());
  const double s = SecondsSince(t0);
  std::remove(file.c_str());
  if (rc != 0) return 0;
  return static_cast<double>(mib << 20) / s;
}

// w1 (features × h rows), b1 (h), w2 (labels × h rows), b2 (labels), Adam.
std::vector<TableSpec> XmcSpecs(const CheckpointBenchOptions& options) {
  const uint32_t h = static_cast<uint32_t>(options.hidden);
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
  return {row(0, "w1", options.features), dense(1, "b1", h), row(2, "w2", options.labels),
          dense(3, "b2", options.labels)};
}

ShardTables MakeShard(const std::vector<TableSpec>& specs, int shard, int shards) {
  ShardTables tables;
  for (const TableSpec& t : specs) {
    uint64_t b = 0, e = 0;
    if (IsDenseTable(t)) std::tie(b, e) = DenseRange(t.size(), shard, shards);
    tables.push_back(std::make_unique<ServerTable>(t, b, e));
  }
  return tables;
}

// Every row of the row tables touched once (created with its initializer),
// as after an epoch.
void TouchRows(const std::vector<TableSpec>& specs, uint32_t h, std::vector<ShardTables>* shards) {
  const int n = static_cast<int>(shards->size());
  for (const uint32_t id : {0u, 2u}) {
    const uint64_t keys = specs[id].num_keys();
    std::vector<std::vector<uint64_t>> mine(n);
    for (uint64_t k = 0; k < keys; ++k) mine[ShardForKey(k, n)].push_back(k);
    std::vector<float> out;
    for (int s = 0; s < n; ++s) {
      for (size_t b = 0; b < mine[s].size(); b += 8192) {
        const size_t e = std::min(mine[s].size(), b + 8192);
        out.resize((e - b) * h);
        (void)(*shards)[s][id]->PullRows(mine[s].data() + b, e - b, out.data());
      }
    }
  }
}

// Writes every shard's file (a thread each) and the manifest; *bytes: the
// files' size, *seconds: the shards' write time.
Status WriteCheckpoint(const std::string& ckpt, const std::vector<ShardTables>& shards, CheckpointManifest* m,
                       uint64_t* bytes, double* seconds) {
  const int n = static_cast<int>(shards.size());
  std::vector<CheckpointFile> files(n);
  std::vector<Status> status(n);
  const auto t0 = std::chrono::steady_clock::now();
  {
    std::vector<std::thread> threads;
    for (int s = 0; s < n; ++s)
      threads.emplace_back([&, s] {
        status[s] = WriteShardCheckpoint(FileSystem::Default(), ckpt, s, n, 1, shards[s], &files[s]);
      });
    for (auto& t : threads) t.join();
  }
  *seconds = SecondsSince(t0);
  *bytes = 0;
  for (int s = 0; s < n; ++s) {
    TETHER_RETURN_IF_ERROR(status[s]);
    *bytes += files[s].bytes();
    *m->add_files() = files[s];
  }
  return WriteManifest(FileSystem::Default(), ckpt, *m);
}

// Loads the checkpoint on `shards_now` shards (a thread each); *seconds:
// the time taken.
Status LoadCheckpoint(const std::string& ckpt, const CheckpointManifest& m, const std::vector<TableSpec>& specs,
                      int shards_now, double* seconds) {
  std::vector<ShardTables> back;
  for (int s = 0; s < shards_now; ++s) back.push_back(MakeShard(specs, s, shards_now));
  std::vector<Status> st(shards_now);
  const auto l0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int s = 0; s < shards_now; ++s)
    threads.emplace_back([&, s] { st[s] = RestoreShardTables(ckpt, m, s, shards_now, &back[s]); });
  for (auto& t : threads) t.join();
  *seconds = SecondsSince(l0);
  for (const Status& x : st) TETHER_RETURN_IF_ERROR(x);
  return Status::OK();
}

struct CheckpointFigures {
  uint64_t bytes = 0;
  double write_s = 0, load_same_s = 0, load_other_s = 0, dd_bps = 0;
};

void PrintCheckpointTable(const CheckpointBenchOptions& options, const std::string& dir, const CheckpointFigures& f) {
  const int n = options.servers;
  const int other = options.load_servers;
  const double gb = static_cast<double>(f.bytes) / 1e9;
  std::printf("Checkpoint of %d shard(s): %.2f GB in %d file(s), under %s.\n"
              "Write: every shard in its own thread (as servers on one host), fsync and rename included.\n"
              "Load: XXH3-64 checked while reading; the files are likely still in the page cache.\n"
              "dd: `dd if=/dev/zero bs=1M conv=fsync` of the same size to the same directory, same run.\n\n",
              n, gb, n, dir.c_str());
  std::printf("| operation | shards | GB | seconds | GB/s | vs dd |\n|---|---:|---:|---:|---:|---:|\n");
  const double dd = f.dd_bps / 1e9;
  std::printf("| dd sequential write | 1 | %.2f | %.2f | %.2f | 1.00 |\n", gb, dd > 0 ? gb / dd : 0.0, dd);
  std::printf("| write checkpoint | %d | %.2f | %.2f | %.2f | %.2f |\n", n, gb, f.write_s, gb / f.write_s,
              dd > 0 ? gb / f.write_s / dd : 0.0);
  std::printf("| load, same shards | %d | %.2f | %.2f | %.2f | %.2f |\n", n, gb, f.load_same_s, gb / f.load_same_s,
              dd > 0 ? gb / f.load_same_s / dd : 0.0);
  std::printf("| load, re-sharded | %d | %.2f | %.2f | %.2f | %.2f |\n", other, gb * other, f.load_other_s,
              gb * other / f.load_other_s, dd > 0 ? gb * other / f.load_other_s / dd : 0.0);
  std::printf("\n(A re-sharded load reads every shard file on every new shard: %d × the bytes.)\n", other);
}

// The benchmark in `dir` (made by the caller); the figures, or the first error.
Status MeasureCheckpoint(const CheckpointBenchOptions& options, const std::string& dir, CheckpointFigures* f) {
  const std::vector<TableSpec> specs = XmcSpecs(options);
  const int n = options.servers;
  std::vector<ShardTables> shards;
  for (int s = 0; s < n; ++s) shards.push_back(MakeShard(specs, s, n));
  TouchRows(specs, static_cast<uint32_t>(options.hidden), &shards);
  CheckpointManifest m;
  m.set_format_version(kCheckpointFormatVersion);
  m.set_job_id("tether-bench");
  m.set_clock(1);
  m.set_num_servers(n);
  m.set_num_workers(1);
  for (const TableSpec& t : specs) *m.add_tables() = t;
  const std::string ckpt = dir + "/" + CheckpointDirName(1, false);
  TETHER_RETURN_IF_ERROR(WriteCheckpoint(ckpt, shards, &m, &f->bytes, &f->write_s));
  shards.clear();  // free the model before loading it back
  f->dd_bps = RunDd(dir, f->bytes);
  TETHER_RETURN_IF_ERROR(LoadCheckpoint(ckpt, m, specs, options.load_servers, &f->load_other_s));
  return LoadCheckpoint(ckpt, m, specs, n, &f->load_same_s);
}

}  // namespace

int RunCheckpointBench(const CheckpointBenchOptions& options) {
  std::string dir = options.dir;
  if (dir.empty()) {
    const char* t = std::getenv("TMPDIR");
    dir = std::string(t != nullptr && *t ? t : "/tmp") + "/tether-bench-checkpoint." + std::to_string(getpid());
  }
  if (Status st = FileSystem::Default()->CreateDirs(dir); !st.ok()) {
    std::fprintf(stderr, "tether-bench checkpoint: %s\n", st.message().c_str());
    return 1;
  }
  std::printf("## Checkpoint write and load: %lld features, %lld labels, hidden %u, Adam\n\n",
              static_cast<long long>(options.features), static_cast<long long>(options.labels),
              static_cast<uint32_t>(options.hidden));
  std::fflush(stdout);
  CheckpointFigures figures;
  if (Status st = MeasureCheckpoint(options, dir, &figures); !st.ok()) {
    std::fprintf(stderr, "tether-bench checkpoint: %s\n", st.message().c_str());
    return 1;
  }
  (void)FileSystem::Default()->RemoveAll(dir);
  PrintCheckpointTable(options, dir, figures);
  return 0;
}

}  // namespace tether
