// Rendezvous backends (core/net/rendezvous.h): the directory and the store
// publish and look up the same way, keep jobs and generations apart, wait
// for entries set later, and time out naming what is missing.
#include "core/net/rendezvous.h"

#include "core/net/curve.h"
#include "proto/rendezvous.pb.h"
#include "tests/testing/temp_dir.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

namespace tether {
namespace {

bool HasLoopbackIpv6() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next)
    if (i->ifa_addr != nullptr && i->ifa_addr->sa_family == AF_INET6 &&
        IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr))
      found = true;
  freeifaddrs(list);
  return found;
}

// Every backend: publish two shards, look them up; another generation and
// another job see nothing; a wait for a shard published later returns it.
void ExerciseBackend(const std::string& spec) {
  SCOPED_TRACE(spec);
  auto rdzv = Rendezvous::Open(spec);
  ASSERT_TRUE(rdzv.ok()) << rdzv.status().message();
  ASSERT_TRUE(PublishServer(rdzv->get(), "job/a b", 3, 0, "tcp://10.0.0.1:5000", 5000).ok());
  ASSERT_TRUE(PublishServer(rdzv->get(), "job/a b", 3, 1, "tcp://[fd00::1]:5001", 5000).ok());
  auto reader = Rendezvous::Open(spec);
  ASSERT_TRUE(reader.ok());
  auto got = LookupServers(reader->get(), "job/a b", 3, 2, 5000, nullptr);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, (std::vector<std::string>{"tcp://10.0.0.1:5000", "tcp://[fd00::1]:5001"}));

  // A requeued job (generation 4) and another job never read these.
  auto stale = LookupServers(reader->get(), "job/a b", 4, 2, 300, nullptr);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), Status::Code::kDeadlineExceeded);
  EXPECT_NE(stale.status().message().find("server-0, server-1"), std::string::npos) << stale.status().message();
  EXPECT_NE(stale.status().message().find(spec), std::string::npos) << stale.status().message();
  auto other = LookupServers(reader->get(), "job/a", 3, 1, 200, nullptr);
  EXPECT_FALSE(other.ok());

  // A shard that comes later: the wait returns once it is published.
  std::atomic<bool> waiting{false};
  StatusOr<std::vector<std::string>> late = Status::Internal("not run");
  std::thread waiter([&] {
    waiting = true;
    late = LookupServers(reader->get(), "late", 0, 3, 10000, nullptr);
  });
  auto writer = Rendezvous::Open(spec);
  ASSERT_TRUE(writer.ok());
  for (int s : {2, 0, 1}) ASSERT_TRUE(PublishServer(writer->get(), "late", 0, s, "tcp://h:" + std::to_string(7000 + s), 5000).ok());
  waiter.join();
  ASSERT_TRUE(late.ok()) << late.status().message();
  EXPECT_EQ(*late, (std::vector<std::string>{"tcp://h:7000", "tcp://h:7001", "tcp://h:7002"}));

  // A server that exits removes its entry; a later lookup waits again.
  ASSERT_TRUE((*writer)->Delete(RendezvousKey{"late", 0, ServerEntryName(1)}, 5000).ok());
  auto after_delete = LookupServers(reader->get(), "late", 0, 3, 200, nullptr);
  ASSERT_FALSE(after_delete.ok());
  EXPECT_NE(after_delete.status().message().find("server-1"), std::string::npos) << after_delete.status().message();
  EXPECT_EQ(after_delete.status().message().find("server-0"), std::string::npos) << after_delete.status().message();

  // An entry that is not an endpoint is refused, naming it.
  ASSERT_TRUE((*writer)->Set(RendezvousKey{"bad", 0, ServerEntryName(0)}, "hello", 5000).ok());
  auto bad = LookupServers(reader->get(), "bad", 0, 1, 1000, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Status::Code::kDataLoss);
  EXPECT_NE(bad.status().message().find("'hello'"), std::string::npos) << bad.status().message();

  // A stop request ends the wait.
  auto stopped = LookupServers(reader->get(), "never", 0, 1, 60000, [] { return true; });
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().code(), Status::Code::kUnavailable);
}

TEST(RendezvousTest, FileBackend) {
  const testing::ScopedTempDir tmp;
  const std::string& dir = tmp.path();
  ExerciseBackend("file:" + dir);
  // One file per entry, under DIR/JOB/GEN/, the job id one path component.
  std::ifstream in(dir + "/job%2Fa%20b/3/server-1");
  std::string text;
  std::getline(in, text);
  EXPECT_EQ(text, "tcp://[fd00::1]:5001");
  ExerciseBackend(dir + "/plain");  // a plain path is a directory too
}

TEST(RendezvousTest, StoreBackend) {
  RendezvousStore store;
  ASSERT_TRUE(store.Start("tcp://127.0.0.1:0").ok());
  ExerciseBackend(store.endpoint());
  EXPECT_GT(store.requests(), 10u);
}

TEST(RendezvousTest, StoreOverIpv6) {
  if (!HasLoopbackIpv6()) GTEST_SKIP() << "SKIP: this machine has no ::1 (IPv6 off)";
  RendezvousStore store;
  ASSERT_TRUE(store.Start("tcp://[::1]:0").ok());
  EXPECT_EQ(store.endpoint().rfind("tcp://[::1]:", 0), 0u) << store.endpoint();
  ExerciseBackend(store.endpoint());
}

// With security.curve the store admits key holders only: the
// servers (their key pair) publish, a listed worker looks them up, and a
// process with an unlisted key or no CURVE at all can neither overwrite an
// entry (a poisoned endpoint would redirect workers) nor read one.
TEST(RendezvousTest, CurveStoreAdmitsKeyHoldersOnly) {
  const testing::ScopedTempDir tmp;
  const std::string& dir = tmp.path();
  auto make = [&](const std::string& name) {
    auto keys = NewCurveKeyPair();
    EXPECT_TRUE(keys.ok());
    EXPECT_TRUE(WriteCurveKeyFiles(dir, name, *keys).ok());
  };
  make("server");
  make("worker");
  make("intruder");
  CurveConfig curve;
  curve.set_server_secret_key_file(dir + "/server.key");
  curve.set_server_public_key_file(dir + "/server.pub");
  curve.set_client_secret_key_file(dir + "/worker.key");
  curve.add_authorized_keys(dir + "/worker.pub");
  std::vector<std::string> admitted;
  auto served = RendezvousCurveServer(curve, &admitted);
  ASSERT_TRUE(served.ok()) << served.status().message();
  EXPECT_EQ(admitted.size(), 2u);  // the worker's key and the servers' own
  SocketOptions store_opts;
  store_opts.curve = *served;
  RendezvousStore store;
  ASSERT_TRUE(store.Start("tcp://127.0.0.1:0", store_opts, admitted).ok());

  auto as_server = RendezvousCurveClient(curve, true);
  auto as_worker = RendezvousCurveClient(curve, false);
  ASSERT_TRUE(as_server.ok() && as_worker.ok());
  SocketOptions server_opts, worker_opts;
  server_opts.curve = *as_server;
  worker_opts.curve = *as_worker;
  auto server = Rendezvous::Open(store.endpoint(), server_opts);
  auto worker = Rendezvous::Open(store.endpoint(), worker_opts);
  ASSERT_TRUE(server.ok() && worker.ok());
  ASSERT_TRUE(PublishServer(server->get(), "job", 0, 0, "tcp://10.0.0.1:5000", 5000).ok());

  // An unlisted key pair that knows the store's public key, and a plain client.
  CurveConfig intruder_curve = curve;
  intruder_curve.set_client_secret_key_file(dir + "/intruder.key");
  auto intruder_keys = CurveClientOptions(intruder_curve);
  ASSERT_TRUE(intruder_keys.ok());
  SocketOptions intruder_opts;
  intruder_opts.curve = *intruder_keys;
  for (const SocketOptions& opts : {intruder_opts, SocketOptions{}}) {
    auto bad = Rendezvous::Open(store.endpoint(), opts);
    ASSERT_TRUE(bad.ok());
    const Status poisoned = PublishServer(bad->get(), "job", 0, 0, "tcp://6.6.6.6:6666", 500);
    EXPECT_EQ(poisoned.code(), Status::Code::kDeadlineExceeded) << poisoned.message();
    auto peek = LookupServers(bad->get(), "job", 0, 1, 300, nullptr);
    EXPECT_FALSE(peek.ok());
  }
  auto got = LookupServers(worker->get(), "job", 0, 1, 5000, nullptr);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, (std::vector<std::string>{"tcp://10.0.0.1:5000"}));
  store.Stop();
}

TEST(RendezvousTest, ClientStartedBeforeTheStoreWaitsForIt) {
  // Learn a free port, then free it; the lookup starts with no store there.
  std::string endpoint;
  {
    RendezvousStore probe;
    ASSERT_TRUE(probe.Start("tcp://127.0.0.1:0").ok());
    endpoint = probe.endpoint();
  }
  StatusOr<std::vector<std::string>> got = Status::Internal("not run");
  std::thread waiter([&] {
    auto r = Rendezvous::Open(endpoint);
    got = LookupServers(r->get(), "j", 0, 1, 20000, nullptr);
  });
  RendezvousStore store;
  Status started = store.Start(endpoint);
  if (started.ok()) {
    auto w = Rendezvous::Open(endpoint);
    ASSERT_TRUE(PublishServer(w->get(), "j", 0, 0, "tcp://h:1", 5000).ok());
  }
  waiter.join();
  if (!started.ok()) GTEST_SKIP() << "SKIP: the freed port was taken meanwhile: " << started.message();
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ((*got)[0], "tcp://h:1");
}

TEST(RendezvousTest, NoStoreTimesOutNamingTheSpec) {
  std::string endpoint;
  {
    RendezvousStore probe;
    ASSERT_TRUE(probe.Start("tcp://127.0.0.1:0").ok());
    endpoint = probe.endpoint();
  }
  auto r = Rendezvous::Open(endpoint);
  ASSERT_TRUE(r.ok());
  auto got = LookupServers(r->get(), "j", 0, 2, 500, nullptr);
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find(endpoint), std::string::npos) << got.status().message();
  EXPECT_NE(got.status().message().find("never answered"), std::string::npos) << got.status().message();
  Status set = PublishServer(r->get(), "j", 0, 0, "tcp://h:1", 300);
  EXPECT_EQ(set.code(), Status::Code::kDeadlineExceeded) << set.message();
}

TEST(RendezvousTest, StoreSurvivesMalformedRequests) {
  RendezvousStore store;
  ASSERT_TRUE(store.Start("tcp://127.0.0.1:0").ok());
  zmq::context_t ctx;
  auto bad = ConnectDealer(ctx, store.endpoint(), "bad", SocketOptions{});
  ASSERT_TRUE(bad.ok());
  bad->send(zmq::buffer(std::string("\xff\xff\xff garbage")), zmq::send_flags::none);
  bad->send(zmq::buffer(std::string("a")), zmq::send_flags::sndmore);
  bad->send(zmq::buffer(std::string("b")), zmq::send_flags::none);
  auto r = Rendezvous::Open(store.endpoint());
  ASSERT_TRUE(PublishServer(r->get(), "j", 0, 0, "tcp://h:1", 5000).ok());
  auto got = LookupServers(r->get(), "j", 0, 1, 5000, nullptr);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ((*got)[0], "tcp://h:1");
}

// Two runs that share a job id, a generation and a rendezvous: the second
// server refuses to take the entry while the first one's process answers
// at it, naming that process; once it is gone, the entry is replaced.
TEST(RendezvousTest, AnEntryALiveProcessHoldsIsNeverReplaced) {
  const testing::ScopedTempDir tmp;
  const std::string& dir = tmp.path();
  RendezvousStore store;
  ASSERT_TRUE(store.Start("tcp://127.0.0.1:0").ok());
  for (const std::string& spec : {"file:" + dir, store.endpoint()}) {
    SCOPED_TRACE(spec);
    auto rdzv = Rendezvous::Open(spec);
    ASSERT_TRUE(rdzv.ok());
    zmq::context_t ctx;
    std::string first;
    auto live = BindRouter(ctx, "tcp://127.0.0.1:0", SocketOptions{}, &first);
    ASSERT_TRUE(live.ok());
    ASSERT_TRUE(PublishServer(rdzv->get(), "same", 0, 0, first, 5000, "abc123").ok());
    ASSERT_TRUE(PublishServer(rdzv->get(), "same", 0, 0, first, 5000, "abc123").ok());  // its own: fine
    Status st = PublishServer(rdzv->get(), "same", 0, 0, "tcp://127.0.0.1:1", 5000);
    ASSERT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.message();
    const std::string held = "rendezvous " + spec + ": entry same/0/server-0 is already held by a live process (pid " +
                             std::to_string(getpid()) + " on host ";
    EXPECT_EQ(st.message().rfind(held, 0), 0u) << st.message();
    EXPECT_NE(st.message().find(", process start id abc123, at " + first + ", since 20"), std::string::npos)
        << st.message();
    EXPECT_NE(st.message().find("): this server of job 'same' generation 0 does not replace it; give this run its "
                                "own --job_id (config name) or --generation, or stop that process"),
              std::string::npos)
        << st.message();
    auto got = LookupServers(rdzv->get(), "same", 0, 1, 1000, nullptr);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ((*got)[0], first);
    // The first run is gone (its entry stays, as after a crash). A socket's
    // close completes in ZeroMQ's I/O thread; ending the context waits for
    // it, so that the listener no longer answers when the next one probes.
    live->close();
    ctx.close();
    ASSERT_TRUE(PublishServer(rdzv->get(), "same", 0, 0, "tcp://127.0.0.1:1", 5000).ok());
    got = LookupServers(rdzv->get(), "same", 0, 1, 1000, nullptr);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ((*got)[0], "tcp://127.0.0.1:1");
  }
}

// A copy that claimed a shard replaces the entry of the primary it claimed
// it from even while that process answers (one stopped and continued
// answers until it steps down), and only that entry: one naming any other
// live process stays.
TEST(RendezvousTest, AClaimReplacesTheSupersededPrimarysEntryOnly) {
  const testing::ScopedTempDir tmp;
  const std::string& dir = tmp.path();
  auto rdzv = Rendezvous::Open("file:" + dir);
  ASSERT_TRUE(rdzv.ok());
  zmq::context_t ctx;
  std::string primary, other;
  auto live = BindRouter(ctx, "tcp://127.0.0.1:0", SocketOptions{}, &primary);
  auto live_other = BindRouter(ctx, "tcp://127.0.0.1:0", SocketOptions{}, &other);
  ASSERT_TRUE(live.ok() && live_other.ok());
  ASSERT_TRUE(PublishServer(rdzv->get(), "j", 0, 0, primary, 5000).ok());
  // The primary answers (a probe would find it live and refuse).
  ASSERT_TRUE(PublishServer(rdzv->get(), "j", 0, 0, "tcp://127.0.0.1:2", 5000, "", primary).ok());
  auto got = LookupServers(rdzv->get(), "j", 0, 1, 1000, nullptr);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[0], "tcp://127.0.0.1:2");
  // Shard 1's entry names another live process: a claim from `primary`
  // does not replace it.
  ASSERT_TRUE(PublishServer(rdzv->get(), "j", 0, 1, other, 5000).ok());
  const Status st = PublishServer(rdzv->get(), "j", 0, 1, "tcp://127.0.0.1:3", 5000, "", primary);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition) << st.message();
  got = LookupServers(rdzv->get(), "j", 0, 2, 1000, nullptr);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ((*got)[1], other);
}

// The store's bounds: an entry above 4 KiB is refused before it is sent;
// a raw client past a bound gets an error reply naming it; a frame above the
// listener's 16 KiB costs its sender the connection, not the store memory.
// A file planted in a rendezvous folder is never read whole.
TEST(RendezvousTest, EntriesAndRequestsPastTheBoundsAreRefused) {
  RendezvousStore store;
  ASSERT_TRUE(store.Start("tcp://127.0.0.1:0").ok());
  auto r = Rendezvous::Open(store.endpoint());
  ASSERT_TRUE(r.ok());
  Status st = (*r)->Set(RendezvousKey{"j", 0, "big"}, std::string(5000, 'x'), 1000);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "rendezvous " + store.endpoint() +
                              ": entry j/0/big (7-byte key, 5000-byte value) is above the limits of 1024 and 4096 bytes");
  zmq::context_t ctx;
  auto raw = ConnectDealer(ctx, store.endpoint(), "raw", SocketOptions{});
  ASSERT_TRUE(raw.ok());
  auto ask = [&](const RendezvousRequest& req) {
    std::string bytes;
    req.SerializeToString(&bytes);
    raw->send(zmq::buffer(bytes), zmq::send_flags::none);
  };
  auto answer = [&](RendezvousReply* reply) {
    zmq::pollitem_t items[] = {{raw->handle(), 0, ZMQ_POLLIN, 0}};
    if (zmq::poll(items, 1, std::chrono::milliseconds(5000)) <= 0) return false;
    zmq::message_t m;
    return raw->recv(m, zmq::recv_flags::dontwait) && reply->ParseFromArray(m.data(), static_cast<int>(m.size()));
  };
  RendezvousRequest set;
  set.set_op(RendezvousRequest::SET);
  set.set_request_id(1);
  set.set_key("j/0/raw");
  set.set_value(std::string(4097, 'v'));
  ask(set);
  RendezvousReply reply;
  ASSERT_TRUE(answer(&reply));
  EXPECT_EQ(reply.request_id(), 1u);
  EXPECT_EQ(reply.error(), "entry above the limits (a key of at most 1024 bytes, a value of at most 4096)");
  // 1,025 held GETs from one connection: the last one is refused.
  for (int i = 0; i < 1025; ++i) {
    RendezvousRequest get;
    get.set_op(RendezvousRequest::GET);
    get.set_request_id(100 + i);
    get.set_key("j/0/missing");
    get.set_wait_ms(30000);
    ask(get);
  }
  ASSERT_TRUE(answer(&reply));
  EXPECT_EQ(reply.request_id(), 1124u);
  EXPECT_EQ(reply.error(), "too many GETs waiting (1024 per connection, 65536 in all)");
  // A 1 MiB frame: ZeroMQ drops that connection at the frame's size.
  auto flood = ConnectDealer(ctx, store.endpoint(), "flood", SocketOptions{});
  ASSERT_TRUE(flood.ok());
  flood->send(zmq::buffer(std::string(1 << 20, 'f')), zmq::send_flags::none);
  ASSERT_TRUE(PublishServer(r->get(), "j", 0, 0, "tcp://h:1", 5000).ok());
  auto got = LookupServers(r->get(), "j", 0, 1, 5000, nullptr);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ((*got)[0], "tcp://h:1");

  const testing::ScopedTempDir tmp;
  const std::string& dir = tmp.path();
  std::filesystem::create_directories(dir + "/j/0");
  std::ofstream(dir + "/j/0/server-0") << std::string(1 << 20, 'p');
  auto file = Rendezvous::Open("file:" + dir);
  auto planted = LookupServers(file->get(), "j", 0, 1, 1000, nullptr);
  ASSERT_FALSE(planted.ok());
  EXPECT_EQ(planted.status().message(), "rendezvous file:" + dir + ": " + dir +
                                            "/j/0/server-0 is larger than an entry (4096 bytes): not written by Tether");
}

TEST(RendezvousTest, BadSpecs) {
  for (const char* spec : {"", "tcp://host", "tcp://host:0", "tcp://host:70000", "http://x/y", "file:"}) {
    auto r = Rendezvous::Open(spec);
    EXPECT_FALSE(r.ok()) << spec;
    if (!r.ok() && *spec) {
      EXPECT_NE(r.status().message().find(spec), std::string::npos) << r.status().message();
    }
  }
  RendezvousStore store;
  EXPECT_FALSE(store.Start("file:/tmp/x").ok());
}

}  // namespace
}  // namespace tether
