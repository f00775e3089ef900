#include "core/net/rendezvous.h"

#include <unistd.h>

#include <glog/logging.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include "core/file_util.h"
#include "core/net/curve.h"
#include "core/regular_file.h"
#include "core/peer_limits.h"
#include "proto/rendezvous.pb.h"

namespace tether {

namespace {

using Clock = std::chrono::steady_clock;

// The store's bounds (docs/SECURITY.md): a request is one frame of at most
// kListenerFrameBytes (ZMQ_MAXMSGSIZE of its socket); an entry's key and
// value, the entries and their bytes, and the GETs held, in all and per
// connection, are bounded; a request past one is refused with an error
// reply naming it and counted.
constexpr size_t kMaxKeys = 65536;
constexpr size_t kMaxTotalBytes = 64u << 20;
constexpr size_t kMaxHeld = 65536;
constexpr size_t kMaxHeldPerPeer = 1024;
// How long a process holding an entry has to answer before its entry counts
// as left by a crash (a live one answers a ZMTP handshake from its I/O
// thread, however busy its shard is).
constexpr int kOwnerProbeMs = 2000;
// A store request is re-sent on a fresh socket after this long unanswered
// (the store restarted, or was not up when the first one was queued).
constexpr int kStoreRetryMs = 2000;

int RemainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

std::string Escape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '_' || c == '-' || (c == '.' && !out.empty())) {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof(buf), "%%%02X", c);
      out += buf;
    }
  }
  return out.empty() ? "%" : out;
}

std::string JoinNames(const std::vector<RendezvousKey>& keys, const std::vector<bool>& have) {
  std::string out;
  for (size_t i = 0; i < keys.size(); ++i)
    if (!have[i]) out += (out.empty() ? "" : ", ") + keys[i].name;
  return out;
}

Status CheckEntry(const std::string& spec, const RendezvousKey& key, const std::string& value) {
  if (key.ToString().size() > kRendezvousKeyBytes || value.size() > kRendezvousValueBytes)
    return Status::InvalidArgument("rendezvous " + spec + ": entry " + key.ToString().substr(0, 64) + " (" +
                                   std::to_string(key.ToString().size()) + "-byte key, " +
                                   std::to_string(value.size()) + "-byte value) is above the limits of " +
                                   std::to_string(kRendezvousKeyBytes) + " and " +
                                   std::to_string(kRendezvousValueBytes) + " bytes");
  return Status::OK();
}

// ---- Directory backend ----------------------------------------------------

class FileRendezvous : public Rendezvous {
 public:
  FileRendezvous(std::string spec, std::string dir) : Rendezvous(std::move(spec)), dir_(std::move(dir)) {}

  Status Set(const RendezvousKey& key, const std::string& value, int /*timeout_ms*/) override {
    TETHER_RETURN_IF_ERROR(CheckEntry(spec_, key, value));
    const std::filesystem::path path = Path(key);
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec)
      return Status::IOError("rendezvous " + spec_ + ": cannot create " + path.parent_path().string() + ": " +
                             ec.message());
    Status st = WriteFileAtomically(path.string(), value + "\n");
    if (!st.ok()) return Status::IOError("rendezvous " + spec_ + ": " + st.message());
    return Status::OK();
  }

  Status Delete(const RendezvousKey& key, int /*timeout_ms*/) override {
    const std::string path = Path(key).string();
    if (unlink(path.c_str()) != 0 && errno != ENOENT)
      return Status::IOError("rendezvous " + spec_ + ": cannot remove " + path + ": " + std::strerror(errno));
    return Status::OK();
  }

  StatusOr<std::vector<std::string>> WaitAll(const std::vector<RendezvousKey>& keys, int timeout_ms,
                                             const std::function<bool()>& stop) override {
    const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    std::vector<std::string> values(keys.size());
    std::vector<bool> have(keys.size(), false);
    // A shared filesystem offers no change notification across hosts
    // (inotify sees local writes only), so look again, more slowly as the
    // wait goes on: 20 ms at first, 250 ms at most.
    int interval_ms = 20;
    while (true) {
      size_t missing = 0;
      for (size_t i = 0; i < keys.size(); ++i) {
        if (have[i]) continue;
        const std::string path = Path(keys[i]).string();
        if (access(path.c_str(), F_OK) != 0) {
          if (errno != ENOENT && errno != ENOTDIR)
            return Status::IOError("rendezvous " + spec_ + ": cannot see " + path + ": " + std::strerror(errno));
          ++missing;
          continue;
        }
        // Anyone who can write the folder can plant a file: a FIFO (whose
        // blocking open would never return) or a device is refused without
        // waiting, and one larger than an entry can be is never read whole.
        StatusOr<RegularFile> file = OpenRegularFile(path, "entry");
        if (!file.ok() && file.status().code() == Status::Code::kInvalidArgument)
          return Status::DataLoss("rendezvous " + spec_ + ": " + file.status().message() + ": not written by Tether");
        if (!file.ok()) return Status::IOError("rendezvous " + spec_ + ": " + file.status().message());
        std::string text(kRendezvousValueBytes + 2, '\0');
        size_t got = 0;
        for (ssize_t n; got < text.size() && (n = ::read(file->fd, &text[got], text.size() - got)) != 0;) {
          if (n < 0 && errno == EINTR) continue;
          if (n < 0) {
            const int err = errno;
            ::close(file->fd);
            return Status::IOError("rendezvous " + spec_ + ": cannot read " + path + ": " + std::strerror(err));
          }
          got += static_cast<size_t>(n);
        }
        ::close(file->fd);
        text.resize(got);
        if (text.size() > kRendezvousValueBytes + 1)
          return Status::DataLoss("rendezvous " + spec_ + ": " + path + " is larger than an entry (" +
                                  std::to_string(kRendezvousValueBytes) + " bytes): not written by Tether");
        while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
        values[i] = text;
        have[i] = true;
      }
      if (missing == 0) return values;
      if (stop && stop()) return Status::Unavailable("rendezvous " + spec_ + ": stopped while waiting");
      if (Clock::now() >= deadline) {
        return Status::DeadlineExceeded("rendezvous " + spec_ + ": after " + std::to_string(timeout_ms) +
                                        " ms, no entry for " + JoinNames(keys, have) + " under " +
                                        Path(keys[0]).parent_path().string());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min({interval_ms, 100, RemainingMs(deadline) + 1})));
      interval_ms = std::min(interval_ms * 3 / 2 + 1, 250);
    }
  }

 private:
  std::filesystem::path Path(const RendezvousKey& key) const {
    return std::filesystem::path(dir_) / Escape(key.job_id) / std::to_string(key.generation) / Escape(key.name);
  }
  std::string dir_;
};

// ---- Store client -----------------------------------------------------------

class StoreRendezvous : public Rendezvous {
 public:
  StoreRendezvous(std::string spec, SocketOptions opts) : Rendezvous(std::move(spec)), opts_(std::move(opts)) {
    std::random_device rd;
    identity_ = "rdzv-" + std::to_string(getpid()) + "-" + std::to_string(rd());
  }

  Status Set(const RendezvousKey& key, const std::string& value, int timeout_ms) override {
    TETHER_RETURN_IF_ERROR(CheckEntry(spec_, key, value));
    RendezvousRequest req;
    req.set_op(RendezvousRequest::SET);
    req.set_key(key.ToString());
    req.set_value(value);
    return Simple(req, timeout_ms, "publish " + key.ToString());
  }

  Status Delete(const RendezvousKey& key, int timeout_ms) override {
    RendezvousRequest req;
    req.set_op(RendezvousRequest::DELETE);
    req.set_key(key.ToString());
    return Simple(req, timeout_ms, "remove " + key.ToString());
  }

  StatusOr<std::vector<std::string>> WaitAll(const std::vector<RendezvousKey>& keys, int timeout_ms,
                                             const std::function<bool()>& stop) override {
    const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    std::vector<std::string> values(keys.size());
    std::vector<bool> have(keys.size(), false);
    bool answered_once = false;
    while (true) {
      // One GET per missing key, held by the store up to `hold` ms; the
      // replies come as the keys are set.
      const int hold = std::min(RemainingMs(deadline), kStoreRetryMs);
      std::map<uint64_t, size_t> pending;
      TETHER_RETURN_IF_ERROR(EnsureSocket());
      for (size_t i = 0; i < keys.size(); ++i) {
        if (have[i]) continue;
        RendezvousRequest req;
        req.set_op(RendezvousRequest::GET);
        req.set_request_id(++next_id_);
        req.set_key(keys[i].ToString());
        req.set_wait_ms(hold);
        TETHER_RETURN_IF_ERROR(Send(req));
        pending[req.request_id()] = i;
      }
      // Unanswered a second past the hold: the store is not (or no longer)
      // there; the next round starts on a fresh socket.
      const Clock::time_point round_end = Clock::now() + std::chrono::milliseconds(hold + 1000);
      while (!pending.empty() && Clock::now() < round_end) {
        if (stop && stop()) return Status::Unavailable("rendezvous " + spec_ + ": stopped while waiting");
        RendezvousReply reply;
        TETHER_ASSIGN_OR_RETURN(bool got, Receive(std::min(100, RemainingMs(round_end)), &reply));
        if (!got) continue;
        auto it = pending.find(reply.request_id());
        if (it == pending.end()) continue;  // an answer to an earlier round
        answered_once = true;
        if (!reply.error().empty())
          return Status::IOError("rendezvous " + spec_ + ": the store refused a lookup of " +
                                 keys[it->second].ToString() + ": " + reply.error());
        if (reply.found()) {
          values[it->second] = reply.value();
          have[it->second] = true;
        }
        pending.erase(it);
      }
      if (std::all_of(have.begin(), have.end(), [](bool b) { return b; })) return values;
      if (!pending.empty()) ResetSocket();
      if (stop && stop()) return Status::Unavailable("rendezvous " + spec_ + ": stopped while waiting");
      if (Clock::now() >= deadline) {
        return Status::DeadlineExceeded(
            "rendezvous " + spec_ + ": after " + std::to_string(timeout_ms) + " ms, no entry for " +
            JoinNames(keys, have) + " of job '" + keys[0].job_id + "' generation " +
            std::to_string(keys[0].generation) +
            (answered_once ? "" : " (the store never answered: is tether-rendezvous, or a process with "
                                  "--rendezvous_serve, listening there?" + NoAnswerHint() + ")"));
      }
    }
  }

 private:
  // A CURVE store answers no one whose handshake it refused: say so.
  std::string NoAnswerHint() const {
    return opts_.curve.enabled()
               ? " Or, with security.curve, it refused this process's key (not in its authorized_keys) or "
                 "holds another key pair than the server_public_key given here: see the store's log"
               : " Or it requires CURVE keys (security.curve) and this process has none";
  }
  Status EnsureSocket() {
    if (socket_) return Status::OK();
    if (!ctx_) ctx_ = std::make_unique<zmq::context_t>();
    SocketOptions opts = opts_;
    opts.heartbeat_ivl_ms = 0;
    opts.monitor_endpoint.clear();
    auto s = ConnectDealer(*ctx_, spec_, identity_ + "-" + std::to_string(++sockets_), opts);
    if (!s.ok()) return Status::InvalidArgument("rendezvous " + spec_ + ": " + s.status().message());
    socket_ = std::make_unique<zmq::socket_t>(std::move(*s));
    return Status::OK();
  }
  void ResetSocket() { socket_.reset(); }

  Status Send(const RendezvousRequest& req) {
    std::string bytes;
    req.SerializeToString(&bytes);
    try {
      if (!socket_->send(zmq::buffer(bytes), zmq::send_flags::dontwait)) {
        // Queue full (a store that is not draining): start over next round.
        ResetSocket();
        return EnsureSocket();
      }
    } catch (const zmq::error_t& e) {
      return Status::IOError("rendezvous " + spec_ + ": send: " + e.what());
    }
    return Status::OK();
  }

  // true: a reply arrived in `timeout_ms` and parsed into *reply.
  StatusOr<bool> Receive(int timeout_ms, RendezvousReply* reply) {
    try {
      zmq::pollitem_t items[] = {{socket_->handle(), 0, ZMQ_POLLIN, 0}};
      if (zmq::poll(items, 1, std::chrono::milliseconds(timeout_ms)) <= 0) return false;
      zmq::message_t msg;
      if (!socket_->recv(msg, zmq::recv_flags::dontwait)) return false;
      if (!reply->ParseFromArray(msg.data(), static_cast<int>(msg.size()))) {
        LOG(WARNING) << "rendezvous " << spec_ << ": a reply that is not a RendezvousReply (" << msg.size()
                     << " bytes) ignored";
        return false;
      }
      return true;
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) return false;
      return Status::IOError("rendezvous " + spec_ + ": receive: " + e.what());
    }
  }

  // SET and DELETE: re-sent each kStoreRetryMs until answered or timeout_ms.
  Status Simple(RendezvousRequest req, int timeout_ms, const std::string& what) {
    const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (true) {
      TETHER_RETURN_IF_ERROR(EnsureSocket());
      req.set_request_id(++next_id_);
      TETHER_RETURN_IF_ERROR(Send(req));
      const Clock::time_point round_end =
          std::min(deadline, Clock::now() + std::chrono::milliseconds(kStoreRetryMs));
      while (Clock::now() < round_end) {
        RendezvousReply reply;
        TETHER_ASSIGN_OR_RETURN(bool got, Receive(std::max(1, std::min(100, RemainingMs(round_end))), &reply));
        if (!got || reply.request_id() != req.request_id()) continue;
        if (!reply.error().empty())
          return Status::IOError("rendezvous " + spec_ + ": the store refused to " + what + ": " + reply.error());
        return Status::OK();
      }
      ResetSocket();
      if (Clock::now() >= deadline)
        return Status::DeadlineExceeded("rendezvous " + spec_ + ": cannot " + what + ": no store answered within " +
                                        std::to_string(timeout_ms) +
                                        " ms (is tether-rendezvous, or a process with --rendezvous_serve, "
                                        "listening there?" + NoAnswerHint() + ")");
    }
  }

  SocketOptions opts_;
  std::string identity_;
  int sockets_ = 0;
  uint64_t next_id_ = 0;
  std::unique_ptr<zmq::context_t> ctx_;
  std::unique_ptr<zmq::socket_t> socket_;  // destroyed before ctx_ (declared after)
};

bool IsEndpoint(const std::string& s) {
  if (s.rfind("ipc://", 0) == 0) return s.size() > 6;
  if (s.rfind("tcp://", 0) != 0) return false;
  const size_t colon = s.rfind(':');
  return colon != std::string::npos && colon > 6 && colon + 1 < s.size() &&
         s.find_first_not_of("0123456789", colon + 1) == std::string::npos && s.substr(colon + 1) != "0";
}

}  // namespace

std::string RendezvousKey::ToString() const {
  return Escape(job_id) + "/" + std::to_string(generation) + "/" + Escape(name);
}

std::string ServerEntryName(int shard) { return "server-" + std::to_string(shard); }

StatusOr<std::unique_ptr<Rendezvous>> Rendezvous::Open(const std::string& spec, const SocketOptions& socket_options) {
  if (spec.empty()) return Status::InvalidArgument("rendezvous: empty spec (expected file:DIR, DIR or tcp://HOST:PORT)");
  if (spec.rfind("tcp://", 0) == 0) {
    const size_t colon = spec.rfind(':');
    const std::string port = colon == std::string::npos ? "" : spec.substr(colon + 1);
    if (colon < 6 || port.empty() || port.find_first_not_of("0123456789") != std::string::npos || port == "0" ||
        port.size() > 5 || std::stoul(port) > 65535)
      return Status::InvalidArgument("rendezvous " + spec + ": expected tcp://HOST:PORT with a port in [1, 65535]");
    return std::unique_ptr<Rendezvous>(new StoreRendezvous(spec, socket_options));
  }
  std::string dir = spec;
  if (spec.rfind("file:", 0) == 0) {
    dir = spec.substr(5);
    // file:///abs/path as well as file:/abs/path and file:rel/path.
    if (dir.rfind("//", 0) == 0) dir = dir.substr(2);
  } else if (spec.find("://") != std::string::npos) {
    return Status::InvalidArgument("rendezvous " + spec +
                                   ": unknown scheme (expected file:DIR, a directory, or tcp://HOST:PORT)");
  }
  if (dir.empty()) return Status::InvalidArgument("rendezvous " + spec + ": no directory after file:");
  return std::unique_ptr<Rendezvous>(new FileRendezvous(spec, dir));
}

std::string EntryOwnerLine(const std::string& endpoint, const std::string& start_id) {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char when[32] = {0};
  struct tm tm {};
  gmtime_r(&now, &tm);
  std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return "pid " + std::to_string(getpid()) + " on host " + (host[0] ? host : "?") +
         (start_id.empty() ? std::string() : ", process start id " + start_id) + ", at " + endpoint + ", since " +
         when;
}

Status PublishServer(Rendezvous* rdzv, const std::string& job_id, uint64_t generation, int shard,
                     const std::string& endpoint, int timeout_ms, const std::string& start_id,
                     const std::string& superseded) {
  const RendezvousKey key{job_id, generation, ServerEntryName(shard)};
  const RendezvousKey owner_key{job_id, generation, ServerEntryName(shard) + ".owner"};
  // An entry another process holds is replaced only once that process no
  // longer answers at it (it crashed and left it): two runs that share a
  // job id, a generation and a rendezvous must not take each other's
  // workers.
  StatusOr<std::vector<std::string>> current = rdzv->WaitAll({key}, 0, nullptr);
  if (current.ok() && !superseded.empty() && (*current)[0] == superseded && superseded != endpoint) {
    LOG(INFO) << "rendezvous " << rdzv->spec() << ": entry " << key.ToString() << " names " << superseded
              << ", the primary whose shard this process claimed: replacing it";
  } else if (current.ok() && (*current)[0] != endpoint) {
    const std::string held = (*current)[0];
    if (EndpointAnswers(held, kOwnerProbeMs)) {
      StatusOr<std::vector<std::string>> owner = rdzv->WaitAll({owner_key}, 0, nullptr);
      return Status::FailedPrecondition(
          "rendezvous " + rdzv->spec() + ": entry " + key.ToString() + " is already held by a live process (" +
          (owner.ok() ? (*owner)[0] : "at " + held) + "): this server of job '" + job_id + "' generation " +
          std::to_string(generation) + " does not replace it; give this run its own --job_id (config name) or "
          "--generation, or stop that process");
    }
    LOG(WARNING) << "rendezvous " << rdzv->spec() << ": entry " << key.ToString() << " names " << held
                 << ", where no process answers within " << kOwnerProbeMs << " ms (one that crashed and left it): "
                 << "replacing it";
  }
  TETHER_RETURN_IF_ERROR(rdzv->Set(owner_key, EntryOwnerLine(endpoint, start_id), timeout_ms));
  return rdzv->Set(key, endpoint, timeout_ms);
}

namespace {

// The entries of `shards`, waited for together; `note` ends a deadline's
// message.
StatusOr<std::vector<std::string>> LookupShards(Rendezvous* rdzv, const std::string& job_id, uint64_t generation,
                                                const std::vector<int>& shards, int timeout_ms,
                                                const std::function<bool()>& stop, const std::string& note) {
  std::vector<RendezvousKey> keys;
  for (int s : shards) keys.push_back(RendezvousKey{job_id, generation, ServerEntryName(s)});
  auto values = rdzv->WaitAll(keys, timeout_ms, stop);
  if (!values.ok()) {
    if (values.status().code() != Status::Code::kDeadlineExceeded) return values.status();
    return Status::DeadlineExceeded(values.status().message() + " (" + note + ")");
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!IsEndpoint((*values)[i]))
      return Status::DataLoss("rendezvous " + rdzv->spec() + ": entry " + keys[i].ToString() +
                              " is not an endpoint (tcp://HOST:PORT or ipc://PATH): '" + (*values)[i] + "'");
  }
  return values;
}

}  // namespace

StatusOr<std::vector<std::string>> LookupServers(Rendezvous* rdzv, const std::string& job_id, uint64_t generation,
                                                 int num_servers, int timeout_ms,
                                                 const std::function<bool()>& stop) {
  std::vector<int> shards;
  for (int s = 0; s < num_servers; ++s) shards.push_back(s);
  return LookupShards(rdzv, job_id, generation, shards, timeout_ms, stop,
                      "cluster.num_servers = " + std::to_string(num_servers) +
                          "; each server publishes its shard once bound");
}

StatusOr<std::string> LookupServer(Rendezvous* rdzv, const std::string& job_id, uint64_t generation, int shard,
                                   int timeout_ms, const std::function<bool()>& stop) {
  TETHER_ASSIGN_OR_RETURN(std::vector<std::string> one,
                          LookupShards(rdzv, job_id, generation, {shard}, timeout_ms, stop,
                                       "shard " + std::to_string(shard) + "'s server publishes it once bound"));
  return one[0];
}

// ---- Store server -------------------------------------------------------------

Status RendezvousStore::Start(const std::string& listen, const SocketOptions& socket_options,
                              const std::vector<std::string>& admitted_keys) {
  if (listen.rfind("tcp://", 0) != 0)
    return Status::InvalidArgument("rendezvous store: cannot serve " + listen + ": a store listens on tcp://HOST:PORT");
  SocketOptions opts = socket_options;
  // A client that stops reading must not stall the store for others.
  opts.send_timeout_ms = std::min(opts.send_timeout_ms, 1000);
  if (opts.curve.enabled() && zap_ == nullptr) {
    // Before the bind: libzmq admits every key while no handler runs.
    TETHER_ASSIGN_OR_RETURN(zap_, ZapHandler::Start(ctx_, admitted_keys, "[rendezvous store] "));
  }
  TETHER_ASSIGN_OR_RETURN(
      guard_, ListenerGuard::Create(ctx_, "rendezvous", ListenerGuard::Limits{}, 0, &opts, "[rendezvous store] "));
  auto s = BindRouter(ctx_, listen, opts, &endpoint_);
  if (!s.ok()) return Status::IOError("rendezvous store: " + s.status().message());
  socket_ = std::move(*s);
  if (opts.curve.enabled()) {
    LOG(INFO) << "[rendezvous store] CURVE on: " << admitted_keys.size() << " key(s) admitted";
  } else if (!UnauthenticatedBindWarning("the rendezvous store", endpoint_).empty()) {
    LOG(WARNING) << "[rendezvous store] listening on " << endpoint_
                 << " without authentication: anyone who can reach this port can read the jobs' server "
                 << "endpoints or plant a false one that redirects workers (security.curve, docs/DEPLOY.md)";
  }
  stop_ = false;
  thread_ = std::thread([this] { Serve(); });
  return Status::OK();
}

void RendezvousStore::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (socket_) socket_.close();
}

namespace {

// The store's keys and the GETs waiting for one (held until the key is set
// or their wait ends). `reply` sends a reply to a peer.
class StoreBook {
 public:
  using Reply = std::function<void(const std::string& peer, const RendezvousReply& reply)>;
  explicit StoreBook(Reply reply) : reply_(std::move(reply)) {}

  // Answers "not found" to every held GET whose wait ended by `now`.
  void Expire(Clock::time_point now) {
    for (auto it = held_.begin(); it != held_.end();) {
      if (it->until > now) {
        ++it;
        continue;
      }
      RendezvousReply r;
      r.set_request_id(it->request_id);
      r.set_found(false);
      reply_(it->peer, r);
      Unhold(it->peer);
      it = held_.erase(it);
    }
  }

  // The reply to `req` from `peer`, or nullopt for a GET held until its
  // key is set.
  std::optional<RendezvousReply> Handle(const std::string& peer, const RendezvousRequest& req,
                                        Clock::time_point now) {
    RendezvousReply reply;
    reply.set_request_id(req.request_id());
    switch (req.op()) {
      case RendezvousRequest::SET:
        Set(req, &reply);
        break;
      case RendezvousRequest::GET: {
        auto it = values_.find(req.key());
        if (it != values_.end()) {
          reply.set_found(true);
          reply.set_value(it->second);
        } else if (req.wait_ms() > 0) {
          if (held_.size() >= kMaxHeld || held_per_peer_[peer] >= kMaxHeldPerPeer) {
            Refuse(&reply, "held_gets", "too many GETs waiting (" + std::to_string(kMaxHeldPerPeer) +
                                            " per connection, " + std::to_string(kMaxHeld) + " in all)");
            break;
          }
          ++held_per_peer_[peer];
          held_.push_back(
              Held{peer, req.request_id(), req.key(), now + std::chrono::milliseconds(std::min(req.wait_ms(), 60000))});
          return std::nullopt;
        }
        break;
      }
      case RendezvousRequest::DELETE:
        if (auto it = values_.find(req.key()); it != values_.end()) {
          bytes_ -= it->first.size() + it->second.size();
          values_.erase(it);
        }
        break;
      default:
        reply.set_error("unknown op " + std::to_string(static_cast<int>(req.op())));
    }
    return reply;
  }

 private:
  struct Held {
    std::string peer;
    uint64_t request_id;
    std::string key;
    Clock::time_point until;
  };

  void Refuse(RendezvousReply* reply, const char* reason, const std::string& why) {
    CountPeerDrop("rendezvous", reason);
    reply->set_error(why);
  }

  // Stores the value and answers every GET held for its key.
  void Set(const RendezvousRequest& req, RendezvousReply* reply) {
    if (req.key().size() > kRendezvousKeyBytes || req.value().size() > kRendezvousValueBytes)
      return Refuse(reply, "entry_bytes", "entry above the limits (a key of at most " +
                                              std::to_string(kRendezvousKeyBytes) + " bytes, a value of at most " +
                                              std::to_string(kRendezvousValueBytes) + ")");
    auto old = values_.find(req.key());
    const size_t freed = old == values_.end() ? 0 : old->first.size() + old->second.size();
    if (old == values_.end() && values_.size() >= kMaxKeys)
      return Refuse(reply, "entries", "store full (" + std::to_string(kMaxKeys) + " keys)");
    if (bytes_ - freed + req.key().size() + req.value().size() > kMaxTotalBytes)
      return Refuse(reply, "store_bytes", "store full (" + std::to_string(kMaxTotalBytes) + " bytes of entries)");
    bytes_ += req.key().size() + req.value().size() - freed;
    values_[req.key()] = req.value();
    VLOG(1) << "rendezvous store: " << req.key() << " = " << req.value();
    for (auto it = held_.begin(); it != held_.end();) {
      if (it->key != req.key()) {
        ++it;
        continue;
      }
      RendezvousReply r;
      r.set_request_id(it->request_id);
      r.set_found(true);
      r.set_value(req.value());
      reply_(it->peer, r);
      Unhold(it->peer);
      it = held_.erase(it);
    }
  }

  void Unhold(const std::string& peer) {
    if (--held_per_peer_[peer] == 0) held_per_peer_.erase(peer);
  }

  Reply reply_;
  std::map<std::string, std::string> values_;
  size_t bytes_ = 0;  // of values_' keys and values
  std::vector<Held> held_;
  std::map<std::string, size_t> held_per_peer_;
};

enum class Received { kRequest, kNone, kInterrupted, kError };

// One request's frames from the ROUTER socket, without waiting. Logs a
// receive error (kError).
Received ReceiveFrames(zmq::socket_t& socket, const std::string& endpoint, std::vector<zmq::message_t>* frames) {
  try {
    zmq::message_t m;
    if (!socket.recv(m, zmq::recv_flags::dontwait)) return Received::kNone;
    frames->push_back(std::move(m));
    while (frames->back().more()) {
      zmq::message_t part;
      if (!socket.recv(part)) break;
      frames->push_back(std::move(part));
    }
  } catch (const zmq::error_t& e) {
    if (e.num() == EINTR) return Received::kInterrupted;
    LOG(ERROR) << "rendezvous store " << endpoint << ": receive: " << e.what();
    return Received::kError;
  }
  return Received::kRequest;
}

}  // namespace

void RendezvousStore::Serve() {
  auto reply_to = [&](const std::string& peer, const RendezvousReply& reply) {
    std::string bytes;
    reply.SerializeToString(&bytes);
    try {
      socket_.send(zmq::buffer(peer), zmq::send_flags::sndmore);
      socket_.send(zmq::buffer(bytes), zmq::send_flags::none);
    } catch (const zmq::error_t&) {
      // The client went away (ROUTER_MANDATORY) or stopped reading: it
      // asks again on a fresh socket if it still cares.
    }
  };
  StoreBook book(reply_to);
  int warnings = 0;
  while (!stop_) {
    zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}, {guard_->handle(), 0, ZMQ_POLLIN, 0}};
    int n = 0;
    try {
      n = zmq::poll(items, 2, std::chrono::milliseconds(100));
      guard_->Poll();
      n = (items[0].revents & ZMQ_POLLIN) ? 1 : 0;
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      LOG(ERROR) << "rendezvous store " << endpoint_ << ": poll: " << e.what();
      return;
    }
    const Clock::time_point now = Clock::now();
    book.Expire(now);
    if (n <= 0) continue;
    for (int burst = 0; burst < 1000; ++burst) {
      std::vector<zmq::message_t> frames;
      const Received got = ReceiveFrames(socket_, endpoint_, &frames);
      if (got == Received::kNone || got == Received::kError) break;
      if (got == Received::kInterrupted) continue;
      ++requests_;
      const std::string peer = frames[0].to_string();
      RendezvousRequest req;
      if (frames.size() != 2 || !req.ParseFromArray(frames[1].data(), static_cast<int>(frames[1].size())) ||
          req.key().empty()) {
        CountPeerDrop("rendezvous", "malformed");
        if (warnings++ < 10)
          LOG(WARNING) << "rendezvous store " << endpoint_ << ": ignored a malformed request (" << frames.size()
                       << " frame(s)) from a peer";
        continue;
      }
      if (std::optional<RendezvousReply> reply = book.Handle(peer, req, now)) reply_to(peer, *reply);
    }
  }
}

}  // namespace tether
