#include "bench/order_bench.h"

#include <cstdio>
#include <string>
#include <vector>

#include "worker/sampling.h"

namespace tether {

int RunOrderBench(const OrderBenchOptions& options) {
  if (options.rows <= 0) {
    std::fprintf(stderr, "tether-bench order: --order_rows=N (rows in the worker's partition) is required\n");
    return 2;
  }
  std::vector<int64_t> order;
  std::string line;
  for (int e = 0; e < options.epochs; ++e) {
    EpochOrder(options.seed, options.rank, e, options.rows, &order);
    line.clear();
    for (size_t i = 0; i < order.size(); ++i) {
      if (i > 0) line += ' ';
      line += std::to_string(order[i]);
    }
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

}  // namespace tether
