#include "core/net/zap_handler.h"

#include <glog/logging.h>

#include <zmq.h>

namespace tether {
namespace {

constexpr char kZapEndpoint[] = "inproc://zeromq.zap.01";

std::string Z85(const zmq::message_t& key32) {
  char text[41];
  if (key32.size() != 32 || zmq_z85_encode(text, static_cast<const uint8_t*>(key32.data()), 32) == nullptr)
    return "(" + std::to_string(key32.size()) + "-byte key)";
  return text;
}

}  // namespace

StatusOr<std::unique_ptr<ZapHandler>> ZapHandler::Start(zmq::context_t& ctx, const std::vector<std::string>& authorized_keys,
                                                        const std::string& log_prefix) {
  std::set<std::string> keys;
  for (const std::string& k : authorized_keys) {
    uint8_t raw[32];
    if (k.size() != 40 || zmq_z85_decode(raw, k.c_str()) == nullptr)
      return Status::InvalidArgument("authorized key '" + k + "' is not 40 characters of Z85");
    keys.insert(std::string(reinterpret_cast<const char*>(raw), 32));
  }
  try {
    std::unique_ptr<ZapHandler> h(new ZapHandler(ctx, std::move(keys), log_prefix));
    // Bound here, on the caller's thread, so that the endpoint exists before
    // any server socket of the context accepts a connection.
    h->rep_.bind(kZapEndpoint);
    h->thread_ = std::thread([p = h.get()] { p->Run(); });
    return h;
  } catch (const zmq::error_t& e) {
    return Status::IOError(log_prefix + "cannot start the CURVE authentication handler at " + kZapEndpoint + ": " +
                           e.what() + (e.num() == EADDRINUSE ? " (another one runs in this ZeroMQ context)" : ""));
  }
}

ZapHandler::ZapHandler(zmq::context_t& ctx, std::set<std::string> keys, std::string log_prefix)
    : keys_(std::move(keys)),
      log_prefix_(std::move(log_prefix)),
      rep_(ctx, zmq::socket_type::rep),
      stop_rx_(ctx, zmq::socket_type::pair),
      stop_tx_(ctx, zmq::socket_type::pair) {
  rep_.set(zmq::sockopt::linger, 0);
  stop_rx_.set(zmq::sockopt::linger, 0);
  stop_tx_.set(zmq::sockopt::linger, 0);
  const std::string stop = "inproc://tether-zap-stop-" + std::to_string(reinterpret_cast<uintptr_t>(this));
  stop_rx_.bind(stop);
  stop_tx_.connect(stop);
}

ZapHandler::~ZapHandler() {
  if (thread_.joinable()) {
    try {
      stop_tx_.send(zmq::str_buffer("stop"), zmq::send_flags::none);
    } catch (const zmq::error_t&) {
      // The context is closing: the thread's poll fails with ETERM and ends.
    }
    thread_.join();
  }
}

void ZapHandler::Run() {
  zmq::pollitem_t items[] = {{rep_.handle(), 0, ZMQ_POLLIN, 0}, {stop_rx_.handle(), 0, ZMQ_POLLIN, 0}};
  while (true) {
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(-1));
      if (items[1].revents & ZMQ_POLLIN) return;
      if (!(items[0].revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> request;
      while (true) {
        zmq::message_t f;
        if (!rep_.recv(f, zmq::recv_flags::dontwait)) break;
        const bool more = f.more();
        request.push_back(std::move(f));
        if (!more) break;
      }
      Answer(request);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      if (e.num() != ETERM) LOG(ERROR) << log_prefix_ << "CURVE authentication handler stopped: " << e.what();
      return;
    }
  }
}

void ZapHandler::Answer(std::vector<zmq::message_t>& request) {
  // RFC 27: version, request id, domain, address, routing id, mechanism,
  // credentials... The reply echoes the request id.
  const bool well_formed = request.size() >= 6 && request[0].to_string() == "1.0";
  const std::string request_id = request.size() > 1 ? request[1].to_string() : "";
  const std::string address = request.size() > 3 ? request[3].to_string() : "?";
  const std::string mechanism = request.size() > 5 ? request[5].to_string() : "";
  bool ok = false;
  std::string why;
  if (!well_formed) {
    why = "malformed ZAP request";
  } else if (mechanism != "CURVE" || request.size() < 7) {
    why = "mechanism " + mechanism + " (only CURVE clients are admitted)";
  } else if (keys_.count(request[6].to_string()) == 0) {
    why = "public key " + Z85(request[6]) + " is not in security.curve.authorized_keys";
  } else {
    ok = true;
  }
  if (ok) {
    admitted_.fetch_add(1);
    VLOG(1) << log_prefix_ << "admitted CURVE client " << Z85(request[6]) << " from " << address;
  } else {
    refused_.fetch_add(1);
    // A refused client's ZeroMQ reconnects every 100 ms or so: log the 1st,
    // 10th, 100th ... refusal of each address and reason, not every one.
    const uint64_t n = ++refusals_[address + ": " + why];
    uint64_t p = 1;
    while (p < n) p *= 10;
    if (p == n)
      LOG(WARNING) << log_prefix_ << "refused a connection from " << address << ": " << why
                   << (n > 1 ? " (" + std::to_string(n) + " times)" : std::string());
  }
  const std::string code = ok ? "200" : "400";
  const std::string text = ok ? "OK" : why;
  rep_.send(zmq::str_buffer("1.0"), zmq::send_flags::sndmore);
  rep_.send(zmq::buffer(request_id), zmq::send_flags::sndmore);
  rep_.send(zmq::buffer(code), zmq::send_flags::sndmore);
  rep_.send(zmq::buffer(text), zmq::send_flags::sndmore);
  rep_.send(zmq::buffer(ok ? Z85(request[6]) : std::string()), zmq::send_flags::sndmore);  // user id
  rep_.send(zmq::str_buffer(""), zmq::send_flags::none);                                     // metadata
}

}  // namespace tether
