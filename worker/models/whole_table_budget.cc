#include "worker/models/whole_table_budget.h"

#include <algorithm>

#include "optim/shard_budget.h"

namespace tether {

Status CheckWholeTableBudgets(const JobConfig& config, const std::vector<TableSpec>& tables,
                              const std::vector<std::string>& whole, const std::string& model) {
  const int shards = config.cluster().num_servers();
  for (const TableSpec& t : tables) {
    const uint64_t limit = t.budget().max_rows();
    if (limit == 0 || limit >= t.num_keys() || std::find(whole.begin(), whole.end(), t.name()) == whole.end())
      continue;
    const uint64_t needed = MostKeysOnAShard(t.num_keys(), shards);
    if (limit >= needed) continue;
    bool own = false;
    for (const auto& tc : config.table()) own = own || (tc.name() == t.name() && tc.has_max_rows());
    const std::string field = own ? "table[" + t.name() + "].max_rows" : "cluster.server_memory_bytes";
    const std::string set = own ? std::to_string(limit) + " rows a shard" : "leaves table " + t.name() + " " +
                                                                                std::to_string(limit) + " rows a shard";
    return Status::InvalidArgument(
        "config field " + field + ": " + set + ", but every training minibatch of " + model + " reads all " +
        std::to_string(t.num_keys()) + " rows of table " + t.name() + ", up to " + std::to_string(needed) +
        " of them on one of the " + std::to_string(shards) + " shard(s): " +
        (own ? "set max_rows to at least " + std::to_string(needed) + ", or drop it"
             : "raise the budget, or give table " + t.name() + " max_rows: " + std::to_string(needed) +
                   " of its own"));
  }
  return Status::OK();
}

}  // namespace tether
