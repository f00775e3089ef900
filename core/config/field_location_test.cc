#include "core/config/field_location.h"

#include <gtest/gtest.h>

#include <string>

namespace tether {
namespace {

// Lines counted by hand: a comment and a blank line come first.
constexpr char kConfig[] =
    "# a job\n"                               // 1
    "\n"                                      // 2
    "name: \"job\"\n"                         // 3
    "optimizer {\n"                           // 4
    "  type: ADAM\n"                          // 5
    "\n"                                      // 6
    "  learning_rate: -0.5  # too small\n"    // 7
    "}\n"                                     // 8
    "train {\n"                               // 9
    "  epochs: 2\n"                           // 10
    "  early_stopping {\n"                    // 11
    "    # which metric\n"                    // 12
    "    metric: \"auc\"\n"                   // 13
    "  }\n"                                   // 14
    "}\n"                                     // 15
    "data { num_features: 0 index_base: 1 }\n"  // 16
    "table {\n"                               // 17
    "  name: \"w1\"\n"                        // 18
    "  consistency { staleness: -3 }\n"       // 19
    "}\n"                                     // 20
    "table {\n"                               // 21
    "  name: \"b1\"\n"                        // 22
    "  consistency {\n"                       // 23
    "    cache_capacity_bytes: 10\n"          // 24
    "  }\n"                                   // 25
    "}\n"                                     // 26
    "cluster {\n"                             // 27
    "  num_servers: 2\n"                      // 28
    "  server_addresses: \"tcp://a:1\"\n"     // 29
    "  server_addresses: \"tcp://b:1\"\n"     // 30
    "}\n";                                    // 31

ConfigFieldLocator Locate(const std::string& text) {
  auto locator = ConfigFieldLocator::FromText(text);
  EXPECT_TRUE(locator.ok()) << locator.status().ToString();
  return std::move(locator).value();
}

TEST(ConfigFieldLocatorTest, NestedFieldsAfterCommentsAndBlankLines) {
  const ConfigFieldLocator at = Locate(kConfig);
  EXPECT_EQ(at.LineOf("name"), 3);
  EXPECT_EQ(at.LineOf("optimizer"), 4);
  EXPECT_EQ(at.LineOf("optimizer.learning_rate"), 7);
  EXPECT_EQ(at.LineOf("train.early_stopping"), 11);
  EXPECT_EQ(at.LineOf("train.early_stopping.metric"), 13);
  // Several fields on one line.
  EXPECT_EQ(at.LineOf("data.num_features"), 16);
  EXPECT_EQ(at.LineOf("data.index_base"), 16);
}

TEST(ConfigFieldLocatorTest, FieldsTheTextDoesNotWriteHaveNoLine) {
  const ConfigFieldLocator at = Locate(kConfig);
  EXPECT_EQ(at.LineOf("optimizer.weight_decay"), -1);   // a default
  EXPECT_EQ(at.LineOf("model.hidden"), -1);             // its section absent
  EXPECT_EQ(at.LineOf("train.adaptive_batch.b_min"), -1);
  EXPECT_EQ(at.LineOf("optimizer.no_such_field"), -1);  // not a field
  EXPECT_EQ(at.LineOf("optimizer.learning_rate.x"), -1);  // past a scalar
  EXPECT_EQ(at.LineOf("optimizer[w1].type"), -1);       // not repeated
  EXPECT_EQ(at.LineOf(""), -1);
  EXPECT_EQ(at.LineOf("optimizer."), -1);
  EXPECT_EQ(at.LineOf("table[w1"), -1);
}

TEST(ConfigFieldLocatorTest, TableEntriesByName) {
  const ConfigFieldLocator at = Locate(kConfig);
  EXPECT_EQ(at.LineOf("table[w1]"), 17);
  EXPECT_EQ(at.LineOf("table[w1].name"), 18);
  EXPECT_EQ(at.LineOf("table[w1].consistency.staleness"), 19);
  EXPECT_EQ(at.LineOf("table[b1].consistency"), 23);
  EXPECT_EQ(at.LineOf("table[b1].consistency.cache_capacity_bytes"), 24);
  EXPECT_EQ(at.LineOf("table[b1].consistency.staleness"), -1);
  EXPECT_EQ(at.LineOf("table[w2].name"), -1);  // no such entry
}

TEST(ConfigFieldLocatorTest, UnnamedEntryOnlyWhenThereIsOne) {
  // Two tables: "table.name" could mean either.
  EXPECT_EQ(Locate(kConfig).LineOf("table.name"), -1);
  const ConfigFieldLocator one = Locate("table {\n  name: \"w1\"\n  consistency { staleness: 1 }\n}\n");
  EXPECT_EQ(one.LineOf("table.name"), 2);
  EXPECT_EQ(one.LineOf("table.consistency.staleness"), 3);
  EXPECT_EQ(one.LineOf("table.optimizer"), -1);
}

TEST(ConfigFieldLocatorTest, RepeatedFieldAtTheEndIsItsFirstValue) {
  const ConfigFieldLocator at = Locate(kConfig);
  EXPECT_EQ(at.LineOf("cluster.server_addresses"), 29);
  EXPECT_EQ(at.LineOf("table"), 17);
  EXPECT_EQ(at.LineOf("model.hidden_layers"), -1);
}

TEST(ConfigFieldLocatorTest, ListSyntax) {
  const ConfigFieldLocator at = Locate(
      "table [\n"                                             // 1
      "  { name: \"w1\" },\n"                                 // 2
      "  {\n"                                                 // 3
      "    name: \"b1\"\n"                                    // 4
      "    optimizer { learning_rate: 0 }\n"                  // 5
      "  }\n"                                                 // 6
      "]\n"                                                   // 7
      "cluster { server_addresses: [\"tcp://a:1\",\n"         // 8
      "                             \"tcp://b:1\"] }\n"       // 9
      "model { hidden_layers: [\n  64,\n  32] }\n");          // 10-12
  EXPECT_EQ(at.LineOf("table[w1]"), 2);  // the line of its first field
  EXPECT_EQ(at.LineOf("table[b1]"), 4);
  EXPECT_EQ(at.LineOf("table[b1].optimizer.learning_rate"), 5);
  EXPECT_EQ(at.LineOf("cluster.server_addresses"), 8);
  // A repeated scalar's line is that of its name, list or not.
  EXPECT_EQ(at.LineOf("model.hidden_layers"), 10);
  EXPECT_EQ(at.LineOf("table"), 1);
}

TEST(ConfigFieldLocatorTest, ListSyntaxBeforeAndAfterBlocks) {
  // Protobuf records one position per "table" written, not per entry: the
  // entries after a list's first must not take the next block's line.
  const ConfigFieldLocator at = Locate(
      "table { name: \"a\" }\n"                      // 1
      "table [{ name: \"b\" },\n"                     // 2
      "       { optimizer { type: SGD }\n"             // 3
      "         name: \"c\" }]\n"                      // 4
      "table {\n  name: \"d\"\n}\n");                  // 5-7
  EXPECT_EQ(at.LineOf("table[a]"), 1);
  EXPECT_EQ(at.LineOf("table[b]"), 2);
  EXPECT_EQ(at.LineOf("table[c]"), 3);  // its first field
  EXPECT_EQ(at.LineOf("table[c].name"), 4);
  EXPECT_EQ(at.LineOf("table[d]"), 6);
  EXPECT_EQ(at.LineOf("table[d].name"), 6);
}

TEST(ConfigFieldLocatorTest, TextThatDoesNotParseIsRefused) {
  auto locator = ConfigFieldLocator::FromText("optimizer {\n  learning_rate: x\n}\n");
  ASSERT_FALSE(locator.ok());
  EXPECT_EQ(locator.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(locator.status().message().rfind("line 2: ", 0), 0u) << locator.status().message();
}

}  // namespace
}  // namespace tether
