#include "tests/testing/recorded_job.h"

#include <gtest/gtest.h>
#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <thread>

#include "core/config.h"
#include "server/shard_input.h"
#include "server/table_budget_checkpoint.h"
#include "server/table_checkpoint.h"
#include "worker/trainer.h"

namespace tether::testing {
namespace {

// One shard's inputs, appended on the shard's thread.
struct Recorder {
  std::mutex mu;
  std::vector<std::string> inputs;
};

}  // namespace

RecordedJob RunRecordedJob(const JobConfig& config) {
  const int servers = config.cluster().num_servers();
  std::vector<std::unique_ptr<Recorder>> recorders;
  RecordedJob job;
  std::vector<std::string> endpoints;
  for (int s = 0; s < servers; ++s) {
    recorders.push_back(std::make_unique<Recorder>());
    ShardOptions o;
    Recorder* r = recorders.back().get();
    o.input_listener = [r](const std::string& identity, const Message& m) {
      std::lock_guard<std::mutex> lock(r->mu);
      r->inputs.push_back(EncodeShardInput(identity, m));
    };
    job.shards.push_back(std::make_unique<ShardThread>(config, s, o));
    endpoints.push_back(job.shards.back()->endpoint());
  }
  job.workers.resize(config.cluster().num_workers());
  std::vector<std::thread> workers;
  for (int w = 0; w < config.cluster().num_workers(); ++w) {
    workers.emplace_back([&, w] {
      TrainerOptions o;
      o.rank = w;
      o.servers = endpoints;
      job.workers[w] = RunWorker(config, o).status();
    });
  }
  for (auto& t : workers) t.join();
  for (auto& s : job.shards) EXPECT_TRUE(s->WaitForExit(30000).ok());
  for (auto& r : recorders) job.inputs.push_back(std::move(r->inputs));
  return job;
}

ShardDigest DigestShard(const ServerShard& s, const JobConfig& config, int shard, const std::string& dir) {
  std::filesystem::create_directories(dir);
  const int servers = config.cluster().num_servers();
  CheckpointFile tables, budget;
  EXPECT_TRUE(WriteShardCheckpoint(FileSystem::Default(), dir, shard, servers, 0, s.tables(), &tables).ok());
  EXPECT_TRUE(WriteShardBudgetState(FileSystem::Default(), dir, shard, servers, 0, s.tables(), &budget).ok());
  ShardDigest d;
  d.table_bytes = tables.bytes();
  d.tables = tables.xxh3();
  d.has_budget = budget.has_name();
  d.budget = budget.xxh3();
  for (int r = 0; r < s.clocks().num_workers(); ++r) d.clocks.push_back(s.clocks().clock(r));
  d.min_clock = s.clocks().min_clock();
  return d;
}

namespace {

// A copy's answer to a CHECKPOINT abandons the round its primary wrote.
void ExpectCopyAbandoned(const ReplyCache::KeptId& primary, const ReplyCache::KeptId& copy) {
  EXPECT_EQ(primary.answered, copy.answered);
  EXPECT_EQ(primary.has_reply, copy.has_reply);
  if (!primary.has_reply || !copy.has_reply) return;
  MessageHeader p, q;  // the header's bytes lead each kept reply; no frames follow
  EXPECT_TRUE(p.ParseFromString(primary.reply));
  EXPECT_TRUE(q.ParseFromString(copy.reply));
  EXPECT_EQ(q.type(), CHECKPOINT_REPLY);
  EXPECT_TRUE(q.checkpoint_reply().abandoned()) << "request " << copy.id;
  if (p.type() == CHECKPOINT_REPLY) {
    EXPECT_EQ(p.checkpoint_reply().clock(), q.checkpoint_reply().clock());
  }
}

}  // namespace

bool ReplayInputs(const std::vector<std::string>& inputs, size_t begin, size_t end, int shard, ServerShard* copy) {
  for (size_t i = begin; i < end; ++i) {
    ShardInput in;
    const Status decoded = DecodeShardInput(inputs[i], "shard " + std::to_string(shard), &in);
    const Status st = decoded.ok() ? copy->Replay(in.identity, &in.message) : decoded;
    if (!st.ok()) {
      ADD_FAILURE() << "shard " << shard << ", input " << i << ": " << st.ToString();
      return false;
    }
  }
  return true;
}

void ExpectSameShardState(const ServerShard& primary, const ServerShard& copy, const JobConfig& c, int s,
                          const std::string& dir) {
  const testing::ShardDigest a = DigestShard(primary, c, s, dir + "/primary");
  const testing::ShardDigest b = DigestShard(copy, c, s, dir + "/copy");
  EXPECT_GT(a.table_bytes, 0u);
  EXPECT_EQ(a.table_bytes, b.table_bytes);
  EXPECT_EQ(a.tables, b.tables);
  EXPECT_EQ(a.has_budget, b.has_budget);
  EXPECT_EQ(a.budget, b.budget);
  EXPECT_EQ(a.clocks, b.clocks);
  EXPECT_EQ(a.min_clock, b.min_clock);
  const ServerStats& p = primary.stats();
  const ServerStats& q = copy.stats();
  EXPECT_EQ(p.pulls, q.pulls);
  EXPECT_EQ(p.pushes, q.pushes);
  EXPECT_EQ(p.rows_pulled, q.rows_pulled);
  EXPECT_EQ(p.updates_applied, q.updates_applied);
  EXPECT_EQ(p.deferred_pulls, q.deferred_pulls);
  EXPECT_EQ(p.bytes_in, q.bytes_in);
  const ShardStats ps = primary.SnapshotStats(), qs = copy.SnapshotStats();
  EXPECT_EQ(std::vector<uint64_t>(ps.rows_evicted().begin(), ps.rows_evicted().end()),
            std::vector<uint64_t>(qs.rows_evicted().begin(), qs.rows_evicted().end()));
  EXPECT_EQ(q.bad_messages, 0u);
  EXPECT_GT(copy.replies_muted(), 0u);
  EXPECT_EQ(primary.coordinator() != nullptr, copy.coordinator() != nullptr);
  if (primary.coordinator() != nullptr && copy.coordinator() != nullptr) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(primary.coordinator()->Snapshot(),
                                                                   copy.coordinator()->Snapshot()));
  }
  EXPECT_EQ(primary.reply_cache() != nullptr, c.cluster().replicas() > 0);
  if (c.cluster().replicas() > 0) {
    EXPECT_GT(ExpectSameReplyCache(primary, copy), 100u);
  }
}

size_t ExpectSameReplyCache(const ServerShard& primary, const ServerShard& copy) {
  const ReplyCache* a = primary.reply_cache();
  const ReplyCache* b = copy.reply_cache();
  EXPECT_EQ(a != nullptr, b != nullptr);
  if (a == nullptr || b == nullptr) return 0;
  EXPECT_EQ(a->Identities(), b->Identities());
  size_t compared = 0;
  for (const std::string& identity : a->Identities()) {
    const std::vector<ReplyCache::KeptId> p = a->Kept(identity), q = b->Kept(identity);
    EXPECT_EQ(p.size(), q.size());
    for (size_t i = 0; i < std::min(p.size(), q.size()); ++i, ++compared) {
      const bool held_bye = p[i].type == BYE && p[i].answered && !q[i].answered;
      if (held_bye || (p[i].type == CHECKPOINT && q[i].type == CHECKPOINT)) {
        EXPECT_EQ(p[i].id, q[i].id);
        if (!held_bye) ExpectCopyAbandoned(p[i], q[i]);
        continue;
      }
      EXPECT_TRUE(p[i] == q[i]) << "request " << p[i].id << " (" << TypeName(p[i].type) << "): answered "
                                << p[i].answered << "/" << q[i].answered << ", reply kept " << p[i].has_reply << "/"
                                << q[i].has_reply;
    }
  }
  return compared;
}

JobConfig SmallBibtexJob() {
  StatusOr<JobConfig> c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return JobConfig();
  c->mutable_model()->set_hidden(32);
  c->mutable_train()->set_epochs(1);
  c->mutable_train()->set_seed(7);
  c->mutable_cluster()->set_startup_timeout_ms(30000);
  c->mutable_cluster()->set_idle_timeout_ms(30000);
  return *c;
}

}  // namespace tether::testing
