// Key-list caching end to end (core/net/key_list_cache.h): real ServerShards
// on 127.0.0.1 in threads and WorkerClients. Rows read and written through
// named key lists are bit-identical to plain requests; the worker's mirror
// predicts exactly which lists a shard holds (defines, uses and evictions
// counted on both ends); a list the shard does not hold is answered
// key_list_unknown and the request is sent again with its keys, without a
// failure for the caller; several workers keep lists of their own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/config.h"
#include "core/net/key_list_cache.h"
#include "server/server.h"
#include "worker/client/client.h"
#include "worker/client/job_session.h"
#include "tests/testing/cluster.h"

namespace tether {
namespace {

JobConfig ServerJob(int workers) {
  JobConfig c;
  c.set_name("key-list-test");
  c.mutable_cluster()->set_num_servers(2);
  c.mutable_cluster()->set_num_workers(workers);
  c.mutable_cluster()->set_idle_timeout_ms(60000);
  c.mutable_cluster()->set_startup_timeout_ms(60000);
  c.mutable_cluster()->set_worker_timeout_ms(60000);
  c.mutable_consistency()->set_model(ASP);
  c.mutable_consistency()->set_staleness(-1);
  c.mutable_consistency()->set_cache(false);
  return c;
}

TableSpec RowTable(uint32_t id, uint32_t dim, OptimizerType type, TableInitializer::Kind init) {
  TableSpec spec;
  spec.set_id(id);
  spec.set_name("t" + std::to_string(id));
  spec.set_kind(TableSpec::ROW);
  spec.set_dim(dim);
  spec.mutable_init()->set_kind(init);
  spec.mutable_init()->set_bound(0.1f);
  spec.mutable_optimizer()->set_type(type);
  spec.mutable_optimizer()->set_learning_rate(0.05f);
  spec.mutable_consistency()->set_model(ASP);
  spec.mutable_consistency()->set_staleness(-1);
  spec.mutable_consistency()->set_cache(false);
  return spec;
}

// A job of one shard for `workers` workers.
JobConfig OneShardJob(int workers) {
  JobConfig c = ServerJob(workers);
  c.mutable_cluster()->set_num_servers(1);
  return c;
}

// A shard on a free port whose key-list cache holds `bytes`.
testing::ShardOptions KeyListBudget(uint64_t bytes) {
  testing::ShardOptions o;
  o.key_list_cache_bytes = bytes;
  return o;
}

;

ClientOptions Options(const JobConfig& c, int rank, const std::vector<std::string>& servers,
                      const std::vector<TableSpec>& tables) {
  ClientOptions o;
  o.rank = rank;
  o.servers = servers;
  o.staleness = -1;
  o.job_id = JobId(c);
  o.request_timeout_ms = 20000;
  o.tables = tables;
  return o;
}

// A one-shard job for one worker: its shard, with a key-list cache of
// `budget` bytes, and worker 0 declaring one SUM table of `dim` from zeros.
struct OneWorker {
  explicit OneWorker(uint32_t dim, uint64_t budget = kDefaultKeyListCacheBytes)
      : job(OneShardJob(1)),
        shard(job, 0, KeyListBudget(budget)),
        client(testing::ConnectClient(Options(job, 0, {shard.endpoint()}, {RowTable(0, dim, SUM, TableInitializer::ZEROS)}))) {}

  // The shard's key-list counters, once it stopped.
  void ExpectShardLists(uint64_t defined, uint64_t used, uint64_t unknown) const {
    const ServerShard::KeyListStats& s = shard.shard().key_list_stats();
    EXPECT_EQ(s.defined, defined);
    EXPECT_EQ(s.used, used);
    EXPECT_EQ(s.unknown, unknown);
  }

  const JobConfig job;
  testing::ShardThread shard;
  const std::unique_ptr<WorkerClient> client;
};

std::vector<uint64_t> SortedKeys(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> keys;
  while (keys.size() < n) {
    for (size_t i = keys.size(); i < n; ++i) keys.push_back(rng());
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  }
  return keys;
}

// One training-like run: per step a pull then a push of the same keys, on
// two tables (dim 1 SGD: the gathered path; dim 8 Adam: rows with state),
// three key sets in turn, two shards. Returns every pull's rows, in order.
struct RunResult {
  std::vector<float> pulled;
  ClientStats client;
  ServerShard::KeyListStats shards[2];
};

RunResult TrainingRun(uint64_t key_list_bytes, bool client_key_lists) {
  const JobConfig c = ServerJob(1);
  RunResult out;
  testing::ShardThread s0(c, 0, KeyListBudget(key_list_bytes)), s1(c, 1, KeyListBudget(key_list_bytes));
  const std::vector<TableSpec> tables = {RowTable(0, 1, SGD, TableInitializer::UNIFORM),
                                         RowTable(1, 8, ADAM, TableInitializer::UNIFORM)};
  ClientOptions o = Options(c, 0, {s0.endpoint(), s1.endpoint()}, tables);
  o.key_lists = client_key_lists;
  auto client = testing::ConnectClient(o);
  if (client == nullptr) return out;
  const std::vector<std::vector<uint64_t>> sets = {SortedKeys(3000, 1), SortedKeys(5000, 2), SortedKeys(700, 3)};
  for (int step = 0; step < 12; ++step) {
    const std::vector<uint64_t>& keys = sets[step % 3];
    for (uint32_t t = 0; t < 2; ++t) {
      const uint32_t dim = tables[t].dim();
      std::vector<float> rows(keys.size() * dim), grads(keys.size() * dim);
      EXPECT_TRUE(client->PullRows(t, keys, rows.data()).Wait().ok());
      out.pulled.insert(out.pulled.end(), rows.begin(), rows.end());
      for (size_t i = 0; i < grads.size(); ++i) grads[i] = std::sin(0.37f * static_cast<float>(i + step)) * rows[i];
      client->PushRows(t, keys, grads.data());
    }
  }
  EXPECT_TRUE(client->WaitAll().ok());
  out.client = client->stats();
  EXPECT_TRUE(JobSession(client.get()).Bye().ok());
  EXPECT_TRUE(s0.WaitForExit(10000).ok());
  EXPECT_TRUE(s1.WaitForExit(10000).ok());
  out.shards[0] = s0.shard().key_list_stats();
  out.shards[1] = s1.shard().key_list_stats();
  return out;
}

TEST(KeyListTest, RowsBitIdenticalToPlainRequests) {
  const RunResult plain = TrainingRun(kDefaultKeyListCacheBytes, /*client_key_lists=*/false);
  const RunResult off = TrainingRun(0, /*client_key_lists=*/true);
  const RunResult lists = TrainingRun(kDefaultKeyListCacheBytes, /*client_key_lists=*/true);
  // 12 steps × 2 tables × (3000, 5000, 700 keys in turn) rows of dim 1 + 8.
  ASSERT_EQ(plain.pulled.size(), size_t{4} * (3000 + 5000 + 700) * 9);
  ASSERT_EQ(lists.pulled.size(), plain.pulled.size());
  ASSERT_EQ(off.pulled.size(), plain.pulled.size());
  EXPECT_EQ(std::memcmp(lists.pulled.data(), plain.pulled.data(), plain.pulled.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(off.pulled.data(), plain.pulled.data(), plain.pulled.size() * sizeof(float)), 0);
  // Plain and off: no list named anywhere.
  EXPECT_EQ(plain.client.key_lists_defined + plain.client.key_lists_used, 0u);
  EXPECT_EQ(off.client.key_lists_defined + off.client.key_lists_used, 0u);
  EXPECT_EQ(plain.shards[0].defined + plain.shards[1].defined, 0u);
  // With lists: each (table, key set, shard) is defined by its first pull
  // (2 tables × 3 sets × 2 shards = 12 defines; every set has ≥ 256 keys
  // per shard), and every other message uses it: 12 steps × 2 tables × 2
  // (pull, push) × 2 shards = 96 messages in all.
  EXPECT_EQ(lists.client.key_lists_defined, 12u);
  EXPECT_EQ(lists.client.key_lists_used, 96u - 12u);
  EXPECT_EQ(lists.client.key_lists_resent, 0u);
  EXPECT_EQ(lists.shards[0].defined + lists.shards[1].defined, 12u);
  EXPECT_EQ(lists.shards[0].used + lists.shards[1].used, 84u);
  EXPECT_EQ(lists.shards[0].unknown + lists.shards[1].unknown, 0u);
  // Keys left out: fewer bytes sent, by the keys of the 84 uses.
  EXPECT_LT(lists.client.bytes_sent, plain.client.bytes_sent);
  EXPECT_EQ(plain.client.bytes_sent - lists.client.bytes_sent,
            (4 * 2 * 2 - 2) * (3000 + 5000 + 700) * sizeof(uint64_t));
  // The metrics' bytes saved say exactly that, on the worker and summed
  // over the shards; nothing is saved without lists.
  EXPECT_EQ(lists.client.key_list_bytes_saved, (4 * 2 * 2 - 2) * (3000 + 5000 + 700) * sizeof(uint64_t));
  EXPECT_EQ(lists.shards[0].bytes_saved + lists.shards[1].bytes_saved, lists.client.key_list_bytes_saved);
  EXPECT_EQ(plain.client.key_list_bytes_saved + off.client.key_list_bytes_saved, 0u);
  EXPECT_EQ(plain.shards[0].bytes_saved + off.shards[0].bytes_saved + off.shards[1].bytes_saved, 0u);
}

// One shard keeps two lists of 300 keys: a third evicts the least recently
// used, on the shard and in the worker's mirror alike, so no request ever
// names a list the shard dropped.
TEST(KeyListTest, EvictionsFollowedExactlyByTheWorker) {
  OneWorker one(/*dim=*/4, /*budget=*/2 * KeyListCache::Charge(300) + 100);
  WorkerClient* client = one.client.get();
  ASSERT_NE(client, nullptr);
  const std::vector<uint64_t> a = SortedKeys(300, 11), b = SortedKeys(300, 12), d = SortedKeys(300, 13);
  std::vector<float> ones(300 * 4, 1.0f), rows(300 * 4);
  // A, B, D (evicts A), A (defines again, evicts B), D (held: a use).
  for (const auto* keys : {&a, &b, &d, &a, &d}) client->PushRows(0, *keys, ones.data());
  ASSERT_TRUE(client->WaitAll().ok());
  EXPECT_EQ(client->stats().key_lists_defined, 4u);
  EXPECT_EQ(client->stats().key_lists_used, 1u);
  EXPECT_EQ(client->stats().key_lists_resent, 0u);
  // SUM from zeros: a and d were pushed twice, b once.
  ASSERT_TRUE(client->PullRows(0, a, rows.data()).Wait().ok());  // a use (A held)
  for (float v : rows) ASSERT_EQ(v, 2.0f);
  ASSERT_TRUE(client->PullRows(0, b, rows.data()).Wait().ok());  // defines B, evicts D
  for (float v : rows) ASSERT_EQ(v, 1.0f);
  ASSERT_TRUE(client->PullRows(0, d, rows.data()).Wait().ok());  // defines D, evicts A
  for (float v : rows) ASSERT_EQ(v, 2.0f);
  EXPECT_EQ(client->stats().key_lists_defined, 6u);
  EXPECT_EQ(client->stats().key_lists_used, 2u);
  // Below kMinKeyListKeys: plain.
  const std::vector<uint64_t> small = SortedKeys(kMinKeyListKeys - 1, 14);
  client->PushRows(0, small, ones.data());
  ASSERT_TRUE(client->WaitAll().ok());
  EXPECT_EQ(client->stats().key_lists_defined, 6u);
  ASSERT_TRUE(JobSession(client).Bye().ok());
  ASSERT_TRUE(one.shard.WaitForExit(10000).ok());
  one.ExpectShardLists(/*defined=*/6, /*used=*/2, /*unknown=*/0);
}

// Two lists that differ only between the keys a probe samples share a
// probe (KeyListProbe): the first is named by it, the second by its full
// signature, and each is used as its own list afterwards, with exact rows.
TEST(KeyListTest, ListsSharingAProbeAreNamedApart) {
  OneWorker one(/*dim=*/2);
  WorkerClient* client = one.client.get();
  ASSERT_NE(client, nullptr);
  std::vector<uint64_t> a(1000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 10 * i + 100;
  std::vector<uint64_t> b = a;
  b[1] += 1;  // position 1 is not among the 64 sampled of 1000
  ASSERT_EQ(KeyListProbe(a.data(), a.size()), KeyListProbe(b.data(), b.size()));
  ASSERT_NE(KeyListSignature(a.data(), a.size()), KeyListSignature(b.data(), b.size()));
  std::vector<float> ga(2000, 1.0f), gb(2000, 3.0f), rows(2000);
  for (int round = 0; round < 2; ++round) {
    client->PushRows(0, a, ga.data());
    client->PushRows(0, b, gb.data());
  }
  ASSERT_TRUE(client->WaitAll().ok());
  ASSERT_TRUE(client->PullRows(0, a, rows.data()).Wait().ok());
  // SUM from zeros: the keys both lists hold got 2 × 1 + 2 × 3, their own key 2 × theirs.
  for (size_t i = 0; i < rows.size(); ++i) ASSERT_EQ(rows[i], i / 2 == 1 ? 2.0f : 8.0f) << i;
  ASSERT_TRUE(client->PullRows(0, b, rows.data()).Wait().ok());
  for (size_t i = 0; i < rows.size(); ++i) ASSERT_EQ(rows[i], i / 2 == 1 ? 6.0f : 8.0f) << i;
  EXPECT_EQ(client->stats().key_lists_defined, 2u);
  EXPECT_EQ(client->stats().key_lists_used, 4u);
  EXPECT_EQ(client->stats().key_lists_resent, 0u);
  ASSERT_TRUE(JobSession(client).Bye().ok());
  ASSERT_TRUE(one.shard.WaitForExit(10000).ok());
  one.ExpectShardLists(/*defined=*/2, /*used=*/4, /*unknown=*/0);
}

// FixedKeys name their list by identity (no comparison of the keys), and
// are told apart from other keys exactly as vectors are: two fixed lists
// sharing a probe get their own names, a vector of the same keys uses the
// fixed list, and every row is what the plain requests give.
TEST(KeyListTest, FixedKeysNameTheirListsAsVectorsDo) {
  OneWorker one(/*dim=*/2);
  WorkerClient* client = one.client.get();
  ASSERT_NE(client, nullptr);
  std::vector<uint64_t> a_keys(1000);
  for (size_t i = 0; i < a_keys.size(); ++i) a_keys[i] = 10 * i + 100;
  std::vector<uint64_t> b_keys = a_keys;
  b_keys[1] += 1;  // the same probe (ListsSharingAProbeAreNamedApart)
  const FixedKeys a = WorkerClient::FixKeys(a_keys), b = WorkerClient::FixKeys(b_keys);
  ASSERT_EQ(a.keys(), a_keys);
  PushValues ga = client->NewPushValues(2000), gb = client->NewPushValues(2000);
  std::fill(ga.data(), ga.data() + 2000, 1.0f);
  std::fill(gb.data(), gb.data() + 2000, 3.0f);
  std::vector<float> rows(2000);
  for (int round = 0; round < 2; ++round) {
    client->PushRows(0, a, ga);
    client->PushRows(0, b, gb);
    ASSERT_TRUE(client->WaitAll().ok());  // the values are not written again, but wait as PushValues says
  }
  ASSERT_TRUE(client->PullRows(0, a, rows.data()).Wait().ok());
  for (size_t i = 0; i < rows.size(); ++i) ASSERT_EQ(rows[i], i / 2 == 1 ? 2.0f : 8.0f) << i;
  ASSERT_TRUE(client->PullRows(0, b_keys, rows.data()).Wait().ok());  // a vector: compared with b's list
  for (size_t i = 0; i < rows.size(); ++i) ASSERT_EQ(rows[i], i / 2 == 1 ? 6.0f : 8.0f) << i;
  EXPECT_EQ(client->stats().key_lists_defined, 2u);
  EXPECT_EQ(client->stats().key_lists_used, 4u);
  // The list a vector defined is used by FixedKeys of the same keys (compared).
  const std::vector<uint64_t> c_keys = SortedKeys(500, 21);
  std::vector<float> gc(1000, 0.5f);
  client->PushRows(0, c_keys, gc.data());
  ASSERT_TRUE(client->PullRows(0, WorkerClient::FixKeys(c_keys), rows.data()).Wait().ok());
  for (size_t i = 0; i < 1000; ++i) ASSERT_EQ(rows[i], 0.5f) << i;
  EXPECT_EQ(client->stats().key_lists_defined, 3u);
  EXPECT_EQ(client->stats().key_lists_used, 5u);
  EXPECT_EQ(client->stats().key_lists_resent, 0u);
  ASSERT_TRUE(JobSession(client).Bye().ok());
  ASSERT_TRUE(one.shard.WaitForExit(10000).ok());
  one.ExpectShardLists(/*defined=*/3, /*used=*/5, /*unknown=*/0);
}

// The shard refuses a define (a NaN gradient is checked before the list is
// kept), so the worker's mirror holds a list the shard does not: the next
// push and pull of those keys name it, are answered key_list_unknown, and
// go again with their keys, transparently.
TEST(KeyListTest, UnknownListIsSentAgainWithItsKeys) {
  OneWorker one(/*dim=*/2);
  WorkerClient* client = one.client.get();
  ASSERT_NE(client, nullptr);
  const std::vector<uint64_t> keys = SortedKeys(1000, 21);
  std::vector<float> bad(2000, 1.0f), good(2000), rows(2000);
  bad[777] = std::numeric_limits<float>::quiet_NaN();
  for (size_t i = 0; i < good.size(); ++i) good[i] = static_cast<float>(i % 7);
  RequestHandle refused = client->PushRows(0, keys, bad.data());
  EXPECT_FALSE(refused.Wait().ok());  // refused whole (case C08), the list not kept
  EXPECT_EQ(client->stats().key_lists_defined, 1u);
  RequestHandle push = client->PushRows(0, keys, good.data());  // names the list: unknown, sent again
  EXPECT_TRUE(push.Wait().ok()) << push.status().ToString();
  EXPECT_EQ(client->stats().key_lists_used, 1u);
  EXPECT_EQ(client->stats().key_lists_resent, 1u);
  EXPECT_EQ(client->stats().key_list_bytes_saved, 0u);  // the use was resent: its keys went after all
  ASSERT_TRUE(client->PullRows(0, keys, rows.data()).Wait().ok());  // defines the list again
  EXPECT_EQ(std::memcmp(rows.data(), good.data(), rows.size() * sizeof(float)), 0);
  ASSERT_TRUE(client->PullRows(0, keys, rows.data()).Wait().ok());  // a use
  EXPECT_EQ(std::memcmp(rows.data(), good.data(), rows.size() * sizeof(float)), 0);
  EXPECT_EQ(client->stats().key_lists_defined, 2u);
  EXPECT_EQ(client->stats().key_lists_used, 2u);
  EXPECT_EQ(client->stats().key_lists_resent, 1u);
  EXPECT_EQ(client->stats().key_list_bytes_saved, 1000 * sizeof(uint64_t));  // the last pull's keys
  EXPECT_EQ(client->stats().updates_failed, 1000u);  // only the NaN push
  EXPECT_FALSE(client->WaitAll().ok());  // the refused push is sticky: the run failed
  (void)JobSession(client).Leave(5000);            // BYE all the same, so the shard ends
  EXPECT_TRUE(one.shard.WaitForExit(10000).ok());
  one.ExpectShardLists(/*defined=*/1, /*used=*/1, /*unknown=*/1);
  EXPECT_EQ(one.shard.shard().key_list_stats().bytes_saved, 1000 * sizeof(uint64_t));
}

// A read ahead (train.pipeline: PullRowsAt for a clock, between
// StartReadAhead and UseReadAhead) that names a list the shard does not
// hold is sent again with its keys and stays a read ahead: the push after
// UseReadAhead carries its reply's version. τ per applied push (the NaN
// push is refused before it is applied): 0, 1, then 0 (a reply taken for a
// plain read would leave the read ahead empty: version 0, τ 2).
TEST(KeyListTest, AReadAheadSentAgainKeepsItsVersions) {
  OneWorker one(/*dim=*/2);
  WorkerClient* client = one.client.get();
  ASSERT_NE(client, nullptr);
  const std::vector<uint64_t> keys = SortedKeys(1000, 21), other = {5};
  ASSERT_EQ(std::count(keys.begin(), keys.end(), uint64_t{5}), 0);
  std::vector<float> bad(2000, 1.0f), rows(2000, -1.0f);
  bad[777] = std::numeric_limits<float>::quiet_NaN();
  const float g[2] = {1.0f, 1.0f};
  EXPECT_FALSE(client->PushRows(0, keys, bad.data()).Wait().ok());  // the list is defined here only
  // Nothing read yet (version 0): τ 0, then 1; the table's version is 2.
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(client->PushRows(0, other, g).Wait().ok());
  std::vector<uint32_t> at(keys.size());  // reversed
  for (size_t i = 0; i < at.size(); ++i) at[i] = static_cast<uint32_t>(at.size() - 1 - i);
  client->StartReadAhead(0);
  RequestHandle pull = client->PullRowsAt(0, keys, at.data(), rows.data(), /*read_clock=*/0);
  ASSERT_TRUE(pull.Wait().ok()) << pull.status().ToString();
  EXPECT_EQ(client->stats().key_lists_resent, 1u);
  for (float v : rows) EXPECT_EQ(v, 0.0f);  // ZEROS; the refused push applied nothing
  client->UseReadAhead(0);
  ASSERT_TRUE(client->PushRows(0, other, g).Wait().ok());  // read at version 2, applied at 2: τ 0
  (void)JobSession(client).Leave(5000);
  EXPECT_TRUE(one.shard.WaitForExit(10000).ok());
  EXPECT_EQ(one.shard.shard().key_list_stats().unknown, 1u);
  const StalenessHistogram& tau = one.shard.stats().staleness;
  EXPECT_EQ(tau.pushes, 3u);
  EXPECT_EQ(tau.count[0], 2u);
  EXPECT_EQ(tau.count[1], 1u);
  EXPECT_EQ(tau.max, 1u);
}

// Two workers push the same keys, each through lists of its own (a list is
// kept per worker connection): the shard sums both exactly.
TEST(KeyListTest, WorkersKeepListsOfTheirOwn) {
  const JobConfig c = OneShardJob(2);
  testing::ShardThread s0(c, 0, KeyListBudget(kDefaultKeyListCacheBytes));
  const std::vector<TableSpec> tables = {RowTable(0, 1, SUM, TableInitializer::ZEROS),
                                         RowTable(1, 3, SUM, TableInitializer::ZEROS)};
  std::unique_ptr<WorkerClient> w[2];
  std::thread t1([&] { w[1] = testing::ConnectClient(Options(c, 1, {s0.endpoint()}, tables)); });
  w[0] = testing::ConnectClient(Options(c, 0, {s0.endpoint()}, tables));
  t1.join();
  ASSERT_NE(w[0], nullptr);
  ASSERT_NE(w[1], nullptr);
  const std::vector<uint64_t> keys = SortedKeys(2000, 31);
  std::vector<float> g(2000 * 3, 1.0f), rows(2000 * 3);
  for (int round = 0; round < 3; ++round) {
    for (int r = 0; r < 2; ++r) {
      for (uint32_t t = 0; t < 2; ++t) w[r]->PushRows(t, keys, g.data());
      ASSERT_TRUE(w[r]->WaitAll().ok());
    }
  }
  for (int r = 0; r < 2; ++r) {
    for (uint32_t t = 0; t < 2; ++t) {
      ASSERT_TRUE(w[r]->PullRows(t, keys, rows.data()).Wait().ok());
      for (size_t i = 0; i < keys.size() * tables[t].dim(); ++i) ASSERT_EQ(rows[i], 6.0f) << "table " << t;
    }
    EXPECT_EQ(w[r]->stats().key_lists_defined, 2u);  // one per table
    EXPECT_EQ(w[r]->stats().key_lists_used, 6u);     // 2 more pushes and 1 pull per table
  }
  std::thread b1([&] { EXPECT_TRUE(JobSession(w[1].get()).Bye().ok()); });
  EXPECT_TRUE(JobSession(w[0].get()).Bye().ok());
  b1.join();
  ASSERT_TRUE(s0.WaitForExit(10000).ok());
  EXPECT_EQ(s0.shard().key_list_stats().defined, 4u);
  EXPECT_EQ(s0.shard().key_list_stats().used, 12u);
  EXPECT_EQ(s0.shard().key_list_bytes_per_worker(), kDefaultKeyListCacheBytes / 2);  // the shard's budget, split
}

}  // namespace
}  // namespace tether
