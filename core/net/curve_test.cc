// CURVE keys and the ZAP handler: key files written and read back exactly,
// never overwritten, refused when others can read a secret key or a line is
// garbled (naming file and line); and real sockets over 127.0.0.1 where the
// handler admits the listed client key only, an unlisted one is told so
// (ZAP status 400) and a plain (non-CURVE) client gets nothing through.
#include "core/net/curve.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#include <zmq.hpp>

#include "core/net/transport.h"
#include "core/net/zap_handler.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

class CurveTest : public ::testing::Test {
 protected:
  CurveKeyPair MakePair(const std::string& name) {
    auto keys = NewCurveKeyPair();
    EXPECT_TRUE(keys.ok()) << keys.status().ToString();
    EXPECT_TRUE(WriteCurveKeyFiles(dir_, name, *keys).ok());
    return *keys;
  }
  void Write(const std::string& path, const std::string& text, mode_t mode) {
    std::ofstream(path) << text;
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
  }
  const testing::ScopedTempDir tmp_;
  const std::string dir_ = tmp_.path();
};

mode_t ModeOf(const std::string& path) {
  struct stat st;
  EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST_F(CurveTest, KeyFilesRoundTripWithTheirModesAndAreNeverOverwritten) {
  const CurveKeyPair keys = MakePair("worker");
  EXPECT_EQ(keys.public_key.size(), 40u);
  EXPECT_EQ(ModeOf(dir_ + "/worker.key"), 0600u);
  EXPECT_EQ(ModeOf(dir_ + "/worker.pub"), 0644u);
  auto pair = ReadCurveKeyFile(dir_ + "/worker.key", true);
  ASSERT_TRUE(pair.ok()) << pair.status().ToString();
  EXPECT_EQ(pair->public_key, keys.public_key);
  EXPECT_EQ(pair->secret_key, keys.secret_key);
  auto pub = ReadCurveKeyFile(dir_ + "/worker.pub", false);
  ASSERT_TRUE(pub.ok()) << pub.status().ToString();
  EXPECT_EQ(pub->public_key, keys.public_key);
  EXPECT_EQ(pub->secret_key, "");
  // A public key file where a pair is needed is named as such.
  EXPECT_EQ(ReadCurveKeyFile(dir_ + "/worker.pub", true).status().message(),
            dir_ + "/worker.pub: no secret-key line in section curve: a public key file (.pub) where a key pair "
                   "(.key) is needed");
  const Status again = WriteCurveKeyFiles(dir_, "worker", *NewCurveKeyPair());
  EXPECT_EQ(again.code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(again.message(), dir_ + "/worker.key exists; tether-keygen never overwrites a key (pick another --name "
                                    "or remove the old pair)");
  EXPECT_EQ(ReadCurveKeyFile(dir_ + "/worker.key", true)->secret_key, keys.secret_key);
  EXPECT_EQ(WriteCurveKeyFiles(dir_, "../x", keys).code(), Status::Code::kInvalidArgument);
}

TEST_F(CurveTest, SecretKeyFileReadableByOthersIsRefusedNamingItsMode) {
  MakePair("server");
  const std::string key = dir_ + "/server.key";
  ASSERT_EQ(chmod(key.c_str(), 0644), 0);
  const auto refused = ReadCurveKeyFile(key, true);
  EXPECT_EQ(refused.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(), key + ": mode 0644 lets other users read the secret key; it must be 0600 or "
                                              "0400 (chmod 600 " + key + ")");
  ASSERT_EQ(chmod(key.c_str(), 0640), 0);
  EXPECT_FALSE(ReadCurveKeyFile(key, true).ok());
  ASSERT_EQ(chmod(key.c_str(), 0400), 0);
  EXPECT_TRUE(ReadCurveKeyFile(key, true).ok());
  // Only secret keys are guarded: the public half may be read by anyone.
  ASSERT_EQ(chmod(key.c_str(), 0644), 0);
  EXPECT_TRUE(ReadCurveKeyFile(key, false).ok());
}

TEST_F(CurveTest, GarbledOrMismatchedKeyFilesNameTheFileAndLine) {
  const CurveKeyPair a = *NewCurveKeyPair(), b = *NewCurveKeyPair();
  const std::string path = dir_ + "/bad.key";
  Write(path, "# comment\nmetadata\ncurve\n    public-key = \"" + a.public_key + "\"\n    secret-key = \"" +
                  a.secret_key.substr(1) + "\"\n", 0600);
  EXPECT_EQ(ReadCurveKeyFile(path, true).status().message(),
            path + ":5: secret-key is not a CURVE key: expected 40 characters of Z85, got 39 characters");
  Write(path, "curve\n    public-key = \"" + b.public_key + "\"\n    secret-key = \"" + a.secret_key + "\"\n", 0600);
  EXPECT_EQ(ReadCurveKeyFile(path, true).status().message(),
            path + ":2: public-key does not belong to the secret-key of line 3 (a damaged or hand-edited key file)");
  Write(path, "-----BEGIN OPENSSH PRIVATE KEY-----\n", 0600);
  EXPECT_EQ(ReadCurveKeyFile(path, true).status().message(),
            path + ":1: expected a section 'metadata' or 'curve', got '-----BEGIN OPENSSH PRIVATE KEY-----' (not a "
                   "ZeroMQ key file? make keys with tether-keygen)");
  Write(path, "curve\n    colour = \"blue\"\n", 0600);
  EXPECT_EQ(ReadCurveKeyFile(path, true).status().message(),
            path + ":2: unknown entry 'colour' in section curve (expected public-key or secret-key)");
  EXPECT_EQ(ReadCurveKeyFile(dir_ + "/none.key", true).status().code(), Status::Code::kNotFound);
}

TEST_F(CurveTest, AKeyFileThatIsNotARegularFileOrTooLargeIsRefusedAtOnce) {
  const std::string fifo = dir_ + "/fifo.key";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  // A blocking open() would never return: no process writes the FIFO.
  EXPECT_EQ(ReadCurveKeyFile(fifo, true).status().message(),
            "key file " + fifo + ": is a FIFO (named pipe), not a regular file");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  const std::string zero = dir_ + "/zero.pub";
  ASSERT_EQ(::symlink("/dev/zero", zero.c_str()), 0);
  EXPECT_EQ(ReadCurveKeyFile(zero, false).status().message(),
            "key file " + zero + ": is a character device, not a regular file");
  EXPECT_EQ(ReadAuthorizedKeys({zero}).status().message(),
            "key file " + zero + ": is a character device, not a regular file");
  const std::string big = dir_ + "/big.pub";
  Write(big, std::string(64 * 1024 + 1, '#'), 0644);
  EXPECT_EQ(ReadCurveKeyFile(big, false).status().message(),
            "key file " + big + ": is 65537 bytes, more than the 65536-byte limit for a key file");
  EXPECT_EQ(ReadCurveKeyFile(dir_ + "/none.pub", false).status().message(), dir_ + "/none.pub: no such key file");
}

TEST_F(CurveTest, AuthorizedKeysComeFromFilesAndDirectoriesOfPubFiles) {
  const CurveKeyPair w0 = MakePair("w0"), w1 = MakePair("w1");
  ASSERT_EQ(mkdir((dir_ + "/auth").c_str(), 0755), 0);
  ASSERT_EQ(rename((dir_ + "/w0.pub").c_str(), (dir_ + "/auth/w0.pub").c_str()), 0);
  ASSERT_EQ(rename((dir_ + "/w1.key").c_str(), (dir_ + "/auth/w1.key").c_str()), 0);  // not a .pub: skipped
  auto keys = ReadAuthorizedKeys({dir_ + "/auth"});
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(*keys, std::vector<std::string>{w0.public_key});
  keys = ReadAuthorizedKeys({dir_ + "/auth", dir_ + "/w1.pub", dir_ + "/auth/w0.pub"});
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_EQ(keys->size(), 2u);  // the repeated key counted once
  EXPECT_EQ(ReadAuthorizedKeys({}).status().message(), "no authorized keys: every worker would be refused");
}

TEST_F(CurveTest, ConfigFieldsAreRequiredPerRoleAndPairsMustMatch) {
  MakePair("server");
  MakePair("worker");
  MakePair("other");
  CurveConfig c;
  std::vector<std::string> authorized;
  EXPECT_EQ(CurveServerOptions(c, &authorized).status().message().rfind(
                "config field security.curve.server_secret_key_file: required on servers", 0),
            0u);
  c.set_server_secret_key_file(dir_ + "/server.key");
  c.add_authorized_keys(dir_ + "/worker.pub");
  auto server = CurveServerOptions(c, &authorized);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  EXPECT_EQ(authorized.size(), 1u);
  EXPECT_EQ(CurveClientOptions(c).status().message().rfind(
                "config field security.curve.client_secret_key_file: required on workers", 0),
            0u);
  c.set_client_secret_key_file(dir_ + "/worker.key");
  c.set_server_public_key_file(dir_ + "/server.pub");
  c.set_client_public_key_file(dir_ + "/other.pub");
  EXPECT_EQ(CurveClientOptions(c).status().message(),
            "config field security.curve.client_public_key_file: " + dir_ + "/other.pub holds another public key than " +
                dir_ + "/worker.key (client_secret_key_file)");
  c.set_client_public_key_file(dir_ + "/worker.pub");
  auto client = CurveClientOptions(c);
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ(client->server_public_key, server->public_key);
  // A server as another server's client: the servers' pair on both ends.
  auto peer = ServerPeerCurveClient(c);
  ASSERT_TRUE(peer.ok()) << peer.status().ToString();
  EXPECT_EQ(peer->secret_key, server->secret_key);
  EXPECT_EQ(peer->public_key, server->public_key);
  EXPECT_EQ(peer->server_public_key, server->public_key);
}

TEST(UnauthenticatedBindWarningTest, OnlyBeyondLoopback) {
  EXPECT_EQ(UnauthenticatedBindWarning("server 0", "tcp://127.0.0.1:5555"), "");
  EXPECT_EQ(UnauthenticatedBindWarning("server 0", "tcp://[::1]:5555"), "");
  EXPECT_EQ(UnauthenticatedBindWarning("server 0", "ipc:///tmp/s0"), "");
  EXPECT_EQ(UnauthenticatedBindWarning("server 0", "inproc://s0"), "");
  EXPECT_NE(UnauthenticatedBindWarning("server 0", "tcp://0.0.0.0:5555").find("anyone who can reach"),
            std::string::npos);
  EXPECT_NE(UnauthenticatedBindWarning("server 1", "tcp://[fd00::1]:5555").find("server 1 listens on tcp://[fd00::1]"),
            std::string::npos);
}

// Receives one message on `s` within `ms`, or returns "".
std::string RecvWithin(zmq::socket_t& s, int ms) {
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  if (zmq::poll(&item, 1, std::chrono::milliseconds(ms)) == 0) return "";
  std::string last;
  zmq::message_t f;
  do {
    (void)s.recv(f);
    last = f.to_string();
  } while (f.more());
  return last;
}

TEST_F(CurveTest, ZapHandlerAdmitsListedClientKeysOnly) {
  const CurveKeyPair server = MakePair("server"), good = MakePair("good"), bad = MakePair("bad");
  zmq::context_t server_ctx(1), client_ctx(1);
  auto zap = ZapHandler::Start(server_ctx, {good.public_key}, "[test] ");
  ASSERT_TRUE(zap.ok()) << zap.status().ToString();
  // One handler per context.
  EXPECT_EQ(ZapHandler::Start(server_ctx, {good.public_key}, "[test] ").status().code(), Status::Code::kIOError);
  SocketOptions so;
  so.curve.secret_key = server.secret_key;
  std::string endpoint;
  auto router = BindRouter(server_ctx, "tcp://127.0.0.1:0", so, &endpoint);
  ASSERT_TRUE(router.ok()) << router.status().ToString();

  auto client = [&](const CurveKeyPair* keys, const std::string& id, const std::string& monitor) {
    SocketOptions co;
    if (keys != nullptr) co.curve = CurveOptions{keys->secret_key, keys->public_key, server.public_key};
    co.monitor_endpoint = monitor;
    co.monitor_events = ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                        ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
    auto s = ConnectDealer(client_ctx, endpoint, id, co);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  };
  // The first event a client's monitor reports: (event id, value).
  auto first_event = [](zmq::socket_t& monitor) {
    zmq::pollitem_t item{monitor.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(10000)) == 0) return std::pair<int, uint32_t>{-1, 0};
    zmq::message_t event, address;
    (void)monitor.recv(event);
    if (event.more()) (void)monitor.recv(address);
    uint16_t id;
    uint32_t value;
    std::memcpy(&id, event.data(), 2);
    std::memcpy(&value, static_cast<const char*>(event.data()) + 2, 4);
    return std::pair<int, uint32_t>{id, value};
  };
  zmq::socket_t bad_monitor(client_ctx, zmq::socket_type::pair), plain_monitor(client_ctx, zmq::socket_type::pair);
  bad_monitor.connect("inproc://bad-monitor");
  plain_monitor.connect("inproc://plain-monitor");
  zmq::socket_t b = client(&bad, "bad", "inproc://bad-monitor");
  zmq::socket_t p = client(nullptr, "plain", "inproc://plain-monitor");
  zmq::socket_t g = client(&good, "good", "");
  b.send(zmq::str_buffer("from bad"), zmq::send_flags::dontwait);
  p.send(zmq::str_buffer("from plain"), zmq::send_flags::dontwait);
  g.send(zmq::str_buffer("from good"), zmq::send_flags::none);
  EXPECT_EQ(first_event(bad_monitor), (std::pair<int, uint32_t>{ZMQ_EVENT_HANDSHAKE_FAILED_AUTH, 400}));
  // The server drops a plain client at the greeting; the client sees a
  // handshake failure (libzmq 4.3.4: no detail, EPIPE), never a success.
  const int plain_event = first_event(plain_monitor).first;
  EXPECT_TRUE(plain_event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL || plain_event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
      << plain_event;
  // Only the listed client's message arrives, and the server answers it.
  EXPECT_EQ(RecvWithin(*router, 10000), "from good");
  EXPECT_EQ(RecvWithin(*router, 200), "");
  router->send(zmq::str_buffer("good"), zmq::send_flags::sndmore);
  router->send(zmq::str_buffer("reply"), zmq::send_flags::none);
  EXPECT_EQ(RecvWithin(g, 10000), "reply");
  EXPECT_EQ((*zap)->admitted(), 1u);
  EXPECT_GE((*zap)->refused(), 1u);  // the bad client retries its connection
  b.close();
  p.close();
  g.close();
  router->close();
}

}  // namespace
}  // namespace tether
