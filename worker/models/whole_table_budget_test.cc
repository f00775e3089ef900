// CheckWholeTableBudgets: XMC_MLP's w2, read whole by every minibatch of
// the full softmax, with a max_rows below its fullest shard's labels is
// refused at start naming the table, the limit and the rows needed, by its
// own field or by cluster.server_memory_bytes; at that count, or with a
// sampled softmax (which reads some labels), it passes.
#include "worker/models/whole_table_budget.h"

#include <gtest/gtest.h>

#include <string>

#include "core/config.h"
#include "optim/shard_budget.h"
#include "worker/models/model_registry.h"

namespace tether {
namespace {

JobConfig BibtexWithW2Rows(uint64_t max_rows) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");  // 2 servers, 159 labels
  EXPECT_TRUE(c.ok());
  TableConfig* w2 = c->add_table();
  w2->set_name("w2");
  w2->set_max_rows(max_rows);
  w2->set_evict(LRU);
  return *c;
}

TEST(WholeTableBudgetTest, W2BelowItsFullestShardIsRefusedNamingTheRowsNeeded) {
  const uint64_t needed = MostKeysOnAShard(159, 2);
  EXPECT_GE(needed, 80u);
  JobConfig c = BibtexWithW2Rows(needed - 1);
  EXPECT_EQ(ValidateModelConfig(c).message(),
            "config field table[w2].max_rows: " + std::to_string(needed - 1) +
                " rows a shard, but every training minibatch of xmc_mlp reads all 159 rows of table w2, up to " +
                std::to_string(needed) + " of them on one of the 2 shard(s): set max_rows to at least " +
                std::to_string(needed) + ", or drop it");
  EXPECT_TRUE(ValidateModelConfig(BibtexWithW2Rows(needed)).ok());
  c.mutable_model()->set_sampled_labels(20);
  EXPECT_TRUE(ValidateModelConfig(c).ok()) << ValidateModelConfig(c).message();
}

TEST(WholeTableBudgetTest, AServerMemoryBudgetThatSplitsW2IsRefusedNamingTheBudget) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok());
  std::vector<TableSpec> tables = TablesForJob(*c);
  tables[2].mutable_budget()->set_max_rows(50);
  const Status st = CheckWholeTableBudgets(*c, tables, {"w2"}, "xmc_mlp");
  EXPECT_EQ(st.message(), "config field cluster.server_memory_bytes: leaves table w2 50 rows a shard, but every "
                          "training minibatch of xmc_mlp reads all 159 rows of table w2, up to " +
                              std::to_string(MostKeysOnAShard(159, 2)) +
                              " of them on one of the 2 shard(s): raise the budget, or give table w2 max_rows: " +
                              std::to_string(MostKeysOnAShard(159, 2)) + " of its own");
  EXPECT_TRUE(CheckWholeTableBudgets(*c, tables, {}, "xmc_mlp").ok()) << "w1 is read by its features";
}

}  // namespace
}  // namespace tether
