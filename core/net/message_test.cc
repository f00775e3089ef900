// SendMessage and RecvMessage ride out signals: a handled signal (a stop
// request: SIGTERM, SIGINT) interrupts a ZeroMQ call on this thread with
// EINTR, which is no failure of the send or the receive. Taken for one, it
// once ended a stopped worker's wait before its stop checkpoint.
#include "core/net/message.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <string>
#include <thread>

#include <zmq.hpp>

namespace tether {
namespace {

std::atomic<uint64_t> g_handled{0};
void CountSignal(int) { g_handled.fetch_add(1, std::memory_order_relaxed); }

// Installs a counting SIGUSR1 handler without SA_RESTART (as std::signal's
// would be for a call the kernel never restarts, such as poll), and puts the
// old one back.
class SignalHandler {
 public:
  SignalHandler() {
    struct sigaction sa = {};
    sa.sa_handler = CountSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    sigaction(SIGUSR1, &sa, &old_);
  }
  ~SignalHandler() { sigaction(SIGUSR1, &old_, nullptr); }

 private:
  struct sigaction old_ = {};
};

// Polls one socket for input, again when a signal interrupts the poll.
bool Readable(zmq::socket_t& s, int timeout_ms) {
  zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    try {
      if (zmq::poll(&item, 1, std::chrono::milliseconds(10)) > 0) return true;
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }
  return false;
}

TEST(MessageSignalTest, SendsAndReceivesRideOutSignals) {
  SignalHandler handler;
  zmq::context_t ctx;
  zmq::socket_t router(ctx, zmq::socket_type::router);
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  router.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::linger, 0);
  dealer.set(zmq::sockopt::routing_id, "worker-0");
  router.bind("inproc://message-signal-test");
  dealer.connect("inproc://message-signal-test");

  // A second thread signals this one all along: some signals land inside
  // ZeroMQ's own system calls (its command pipe's poll).
  const pthread_t self = pthread_self();
  std::atomic<bool> done{false};
  std::thread signaller([&] {
    while (!done.load()) {
      pthread_kill(self, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::microseconds(5));
    }
  });

  constexpr uint64_t kMessages = 150000;
  uint64_t received = 0, replies = 0;
  Status failure;
  for (uint64_t i = 0; i < kMessages && failure.ok(); ++i) {
    Message m;
    m.header.set_type(PULL);
    m.header.set_request_id(i);
    m.header.set_num_keys(1);
    const uint64_t key = i;
    m.keys = zmq::message_t(&key, sizeof(key));
    failure = SendMessage(dealer, &m, nullptr, "server 0");
    if (!failure.ok()) break;
    if (!Readable(router, 5000)) {
      failure = Status::DeadlineExceeded("request " + std::to_string(i) + " never arrived");
      break;
    }
    Message got;
    std::string identity;
    failure = RecvMessage(router, &got, &identity);
    if (!failure.ok()) break;
    if (got.header.request_id() == i && identity == "worker-0") ++received;
    // The reply back over the ROUTER (the server's path).
    Message reply;
    reply.header.set_type(PULL_REPLY);
    reply.header.set_request_id(i);
    failure = SendMessage(router, &reply, &identity, "worker 0");
    if (!failure.ok()) break;
    if (!Readable(dealer, 5000)) {
      failure = Status::DeadlineExceeded("reply " + std::to_string(i) + " never arrived");
      break;
    }
    Message back;
    failure = RecvMessage(dealer, &back, nullptr);
    if (failure.ok() && back.header.request_id() == i && back.header.type() == PULL_REPLY) ++replies;
  }
  done.store(true);
  signaller.join();
  EXPECT_TRUE(failure.ok()) << failure.message() << " after " << received << " messages and "
                            << g_handled.load() << " signals";
  EXPECT_EQ(received, kMessages);
  EXPECT_EQ(replies, kMessages);
  EXPECT_GT(g_handled.load(), 0u);
}

}  // namespace
}  // namespace tether
