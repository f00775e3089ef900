#include "bench/updates_bench.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <vector>

#include "core/prefetch.h"
#include "optim/optimizer.h"
#include "server/table.h"

namespace tether {
namespace {

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

LastLevelCache SysfsLastLevelCache() {
  LastLevelCache llc;
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
  return llc;
}

LastLevelCache ReadLastLevelCache(int64_t llc_bytes) {
  LastLevelCache llc;
  if (llc_bytes > 0) {
    llc.bytes = static_cast<uint64_t>(llc_bytes);
    llc.source = "--llc_bytes";
    return llc;
  }
  llc = SysfsLastLevelCache();
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

void PrintUpdatesHeader(const UpdatesBenchOptions& options, const LastLevelCache& llc, double target_bytes) {
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
              llc.bytes / 1048576.0, llc.source.c_str(), Si(static_cast<double>(options.rows)).c_str(),
              options.llc_multiple, target_bytes / 1048576.0, static_cast<long long>(options.batch));
  std::fflush(stdout);
}

struct Row {
  std::string opt;
  int64_t dim, rows;
  double working_set_bytes;
  double table_rows_s, scattered_rows_s, in_order_rows_s;  // rows/s
};

// One cell's pushes: a random permutation of every row, cut into sorted
// batches, so a pass reuses nothing a cache could keep.
std::vector<uint64_t> ShuffledBatches(int64_t rows, int64_t batch, std::mt19937_64* rng) {
  std::vector<uint64_t> perm(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) perm[i] = static_cast<uint64_t>(i);
  std::shuffle(perm.begin(), perm.end(), *rng);
  const int64_t num_batches = rows / batch;
  for (int64_t b = 0; b < num_batches; ++b) std::sort(perm.begin() + b * batch, perm.begin() + (b + 1) * batch);
  return perm;
}

// The table of one cell with every row touched once (created with its
// initializer: creation is not what is measured).
std::unique_ptr<ServerTable> TouchedTable(const OptimizerConfig& oc, int64_t dim, int64_t rows) {
  TableSpec spec;
  spec.set_id(0);
  spec.set_name("w");
  spec.set_kind(TableSpec::ROW);
  spec.set_dim(static_cast<uint32_t>(dim));
  spec.mutable_init()->set_kind(TableInitializer::UNIFORM);
  spec.mutable_init()->set_bound(0.01f);
  spec.mutable_init()->set_seed(1);
  *spec.mutable_optimizer() = oc;
  auto table = std::make_unique<ServerTable>(spec, 0, 0);
  std::vector<uint64_t> all(std::min<int64_t>(rows, 65536));
  std::vector<float> sink(all.size() * dim);
  for (int64_t b = 0; b < rows; b += static_cast<int64_t>(all.size())) {
    const int64_t e = std::min<int64_t>(rows, b + static_cast<int64_t>(all.size()));
    for (int64_t i = b; i < e; ++i) all[i - b] = static_cast<uint64_t>(i);
    (void)table->PullRows(all.data(), e - b, sink.data());  // far below the row limit
  }
  return table;
}

// The table path: ServerTable::PushRows of the batches in turn, rows/s.
double TableRowsPerSecond(ServerTable* table, int64_t batch, const std::vector<uint64_t>& perm,
                          const std::vector<float>& g, const BenchTiming& timing) {
  const int64_t num_batches = static_cast<int64_t>(perm.size()) / batch;
  int64_t done = 0;
  double t0 = Now(), elapsed = 0;
  for (int64_t i = 0; elapsed < timing.min_time_s || i < timing.min_reps; ++i) {
    const uint64_t* ks = perm.data() + (i % num_batches) * batch;
    (void)table->PushRows(ks, batch, g.data());
    done += batch;
    elapsed = Now() - t0;
  }
  return done / elapsed;
}

// The bare step: Optimizer::Apply on rows of a plain array laid out as the
// table's ([w | state] a row, on huge pages), with no lookup and no
// finiteness check, rows hinted two ahead as the table does, in `order`.
// Scattered (the table path's order) it is the most the table path could
// reach on this machine; in order, the gap to scattered is what scattering
// the rows costs the memory system (translation and DRAM pages), not the
// step's arithmetic.
class BareStep {
 public:
  BareStep(const Optimizer& optimizer, int64_t dim, int64_t rows)
      : optimizer_(optimizer), dim_(dim), stride_(dim + optimizer.StateFloats(dim)),
        plain_(static_cast<size_t>(rows * stride_), 0.01f) {
    for (int64_t r = 0; r < rows; ++r) optimizer_.InitState(plain_.data() + r * stride_ + dim, dim);
  }

  double RowsPerSecond(const std::vector<uint64_t>& order, int64_t batch, const std::vector<float>& g,
                       const BenchTiming& timing) {
    constexpr int64_t kAhead = 2;
    const int64_t num_batches = static_cast<int64_t>(order.size()) / batch;
    const uint64_t lines = (stride_ * sizeof(float) + 63) / 64;
    int64_t rows_done = 0;
    const double start = Now();
    double taken = 0;
    for (int64_t i = 0; taken < timing.min_time_s || i < timing.min_reps; ++i) {
      const uint64_t* ks = order.data() + (i % num_batches) * batch;
      for (int64_t j = 0; j < batch; ++j) {
        if (j + kAhead < batch) {
          const char* next = reinterpret_cast<const char*>(plain_.data() + ks[j + kAhead] * stride_);
          for (uint64_t l = 0; l < lines; ++l) HintWrite(next + l * 64);
        }
        float* row = plain_.data() + ks[j] * stride_;
        (void)optimizer_.Apply(row, row + dim_, g.data() + j * dim_, dim_);
      }
      rows_done += batch;
      taken = Now() - start;
    }
    return rows_done / taken;
  }

 private:
  const Optimizer& optimizer_;
  const int64_t dim_;
  const uint64_t stride_;
  std::vector<float, table_internal::HugePageAllocator<float>> plain_;
};

Row MeasureCell(const std::string& name, const OptimizerConfig& oc, int64_t dim, double target_bytes,
                const UpdatesBenchOptions& options, std::mt19937_64* rng) {
  const Optimizer optimizer(oc);
  const double resident_row_bytes = (dim + optimizer.StateFloats(dim)) * 4.0;
  const int64_t rows =
      std::max<int64_t>(options.rows, static_cast<int64_t>(std::ceil(target_bytes / resident_row_bytes)));
  const int64_t batch = std::max<int64_t>(1, std::min<int64_t>(options.batch, rows));
  // The table stays resident while the bare step runs, as a server's would.
  const std::unique_ptr<ServerTable> table = TouchedTable(oc, dim, rows);
  const std::vector<uint64_t> perm = ShuffledBatches(rows, batch, rng);
  std::vector<float> g(batch * dim);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  for (float& x : g) x = normal(*rng);
  Row row{name, dim, rows, rows * resident_row_bytes, 0, 0, 0};
  row.table_rows_s = TableRowsPerSecond(table.get(), batch, perm, g, options.timing);
  BareStep bare(optimizer, dim, rows);
  row.scattered_rows_s = bare.RowsPerSecond(perm, batch, g, options.timing);
  std::vector<uint64_t> in_order(perm.size());
  for (size_t i = 0; i < in_order.size(); ++i) in_order[i] = i;
  row.in_order_rows_s = bare.RowsPerSecond(in_order, batch, g, options.timing);
  return row;
}

bool OptimizerNamed(const std::string& name, OptimizerConfig* oc) {
  if (name == "sgd") {
    oc->set_type(SGD);
  } else if (name == "adagrad") {
    oc->set_type(ADAGRAD);
  } else if (name == "adam") {
    oc->set_type(ADAM);
  } else {
    return false;
  }
  oc->set_learning_rate(1e-4f);
  return true;
}

void PrintUpdatesTable(const std::vector<Row>& results, const LastLevelCache& llc, const Stream& before,
                       const Stream& after) {
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
}

}  // namespace

int RunUpdatesBench(const UpdatesBenchOptions& options) {
  const std::vector<int64_t> dims = ParseList(options.dims.empty() ? "64,256" : options.dims);
  const std::vector<std::string> names = ParseNames(options.optimizers);
  const LastLevelCache llc = ReadLastLevelCache(options.llc_bytes);
  const double target_bytes = options.llc_multiple * static_cast<double>(llc.bytes);
  PrintUpdatesHeader(options, llc, target_bytes);
  // STREAM's rule: each array at least 4× the cache, or the probe measures
  // the cache and the ratios against it mean nothing.
  const int64_t stream_floats =
      std::max<int64_t>(options.stream_floats, static_cast<int64_t>(std::ceil(target_bytes / sizeof(float))));
  std::printf("Bandwidth probe arrays: 3 × %.1f MiB.\n\n", stream_floats * 4 / 1048576.0);
  const Stream before = ProbeBandwidth(stream_floats);
  std::mt19937_64 rng(42);
  std::vector<Row> results;
  for (const std::string& name : names) {
    OptimizerConfig oc;
    if (!OptimizerNamed(name, &oc)) {
      std::fprintf(stderr, "tether-bench: unknown optimizer %s in --optimizers (sgd, adagrad, adam)\n", name.c_str());
      return 2;
    }
    for (int64_t dim : dims) results.push_back(MeasureCell(name, oc, dim, target_bytes, options, &rng));
  }
  const Stream after = ProbeBandwidth(stream_floats);
  PrintUpdatesTable(results, llc, before, after);
  return 0;
}

}  // namespace tether
