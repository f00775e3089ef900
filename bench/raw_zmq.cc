#include "bench/raw_zmq.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

namespace tether {
namespace {

struct RawRequest {
  uint32_t op;           // 0 = pull, 1 = push
  uint32_t pad;
  uint64_t reply_bytes;  // pull: bytes to send back
};

}  // namespace

RawServer::RawServer() : socket_(ctx_, zmq::socket_type::router) {
  socket_.set(zmq::sockopt::linger, 0);
  socket_.set(zmq::sockopt::sndhwm, 0);  // a reply above the mark would be dropped
  socket_.set(zmq::sockopt::rcvhwm, 0);
  socket_.bind("tcp://127.0.0.1:0");
  endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
  thread_ = std::thread([this] { Loop(); });
}

RawServer::~RawServer() {
  stop_.store(true);
  thread_.join();
}

void RawServer::Loop() {
  zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}};
  std::vector<zmq::message_t> frames;
  while (!stop_.load()) {
    zmq::poll(items, 1, std::chrono::milliseconds(50));
    if (!(items[0].revents & ZMQ_POLLIN)) continue;
    frames.clear();
    while (true) {
      zmq::message_t f;
      if (!socket_.recv(f, zmq::recv_flags::none)) break;
      const bool more = f.more();
      frames.push_back(std::move(f));
      if (!more) break;
    }
    if (frames.size() < 2 || frames[1].size() != sizeof(RawRequest)) continue;
    RawRequest req;
    std::memcpy(&req, frames[1].data(), sizeof(req));
    socket_.send(frames[0], zmq::send_flags::sndmore);
    if (req.op == 0) {
      if (buffer_.size() < req.reply_bytes) {
        buffer_.assign(req.reply_bytes, 1);  // first request of a size: fault the pages in, untimed (warm-up)
      }
      zmq::message_t reply(buffer_.data(), req.reply_bytes, nullptr, nullptr);  // zero-copy, never freed
      socket_.send(reply, zmq::send_flags::none);
    } else {
      socket_.send(zmq::message_t(), zmq::send_flags::none);
    }
  }
}

RawClient::RawClient(const std::vector<std::string>& endpoints, int64_t chunk_bytes) : chunk_bytes_(chunk_bytes) {
  for (const auto& ep : endpoints) {
    sockets_.emplace_back(ctx_, zmq::socket_type::dealer);
    sockets_.back().set(zmq::sockopt::linger, 0);
    sockets_.back().set(zmq::sockopt::sndhwm, 0);
    sockets_.back().set(zmq::sockopt::rcvhwm, 0);
    sockets_.back().connect(ep);
  }
}

Status RawClient::Op(bool push, int64_t n, int64_t dim, const char* keys, const char* values) {
  const int64_t s_count = static_cast<int64_t>(sockets_.size());
  const int64_t chunk = chunk_bytes_ > 0 ? std::max<int64_t>(1, chunk_bytes_ / (dim * 4)) : n;
  std::vector<int64_t> pending(s_count, 0);
  int64_t offset = 0, total = 0;
  for (int64_t s = 0; s < s_count; ++s) {
    const int64_t ns = n / s_count + (s == 0 ? n % s_count : 0);
    for (int64_t c0 = 0; c0 < ns; c0 += chunk) {
      const int64_t nc = std::min(chunk, ns - c0);
      const int64_t at = offset + c0;
      RawRequest req{push ? 1u : 0u, 0, static_cast<uint64_t>(nc * dim * 4)};
      sockets_[s].send(zmq::message_t(&req, sizeof(req)), zmq::send_flags::sndmore);
      zmq::message_t k(const_cast<char*>(keys + at * 8), nc * 8, nullptr, nullptr);
      if (push) {
        sockets_[s].send(k, zmq::send_flags::sndmore);
        zmq::message_t v(const_cast<char*>(values + at * dim * 4), nc * dim * 4, nullptr, nullptr);
        sockets_[s].send(v, zmq::send_flags::none);
      } else {
        sockets_[s].send(k, zmq::send_flags::none);
      }
      ++pending[s];
      ++total;
    }
    offset += ns;
  }
  std::vector<zmq::pollitem_t> items;
  for (auto& s : sockets_) items.push_back({s.handle(), 0, ZMQ_POLLIN, 0});
  const int64_t sent = total;
  auto last = std::chrono::steady_clock::now();
  while (total > 0) {
    zmq::poll(items.data(), items.size(), std::chrono::milliseconds(100));
    for (int64_t s = 0; s < s_count; ++s) {
      if (pending[s] == 0 || !(items[s].revents & ZMQ_POLLIN)) continue;
      zmq::message_t m;
      while (pending[s] > 0 && sockets_[s].recv(m, zmq::recv_flags::dontwait)) {
        --pending[s];
        --total;
        last = std::chrono::steady_clock::now();
      }
    }
    if (total > 0 && std::chrono::steady_clock::now() - last > std::chrono::milliseconds(kReplyTimeoutMs))
      return Status::DeadlineExceeded("raw ZeroMQ baseline: " + std::to_string(total) + " of " +
                                      std::to_string(sent) + " replies missing after " +
                                      std::to_string(kReplyTimeoutMs / 1000) + " s without one");
  }
  return Status::OK();
}

}  // namespace tether
