#include "server/server.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

#include <algorithm>

#include "core/env.h"
#include "core/net/curve.h"
#include "core/net/eval_frames.h"
#include "core/net/transport.h"
#include "core/partition.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/chunk_state.h"
#include "server/shard_memory.h"
#include "server/table_checkpoint.h"

namespace tether {
namespace {

using SteadyClock = std::chrono::steady_clock;

int64_t MsSince(SteadyClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - t).count();
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define TETHER_SCAN_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define TETHER_SCAN_CLONES
#endif

// The scans below run over every key and value of every request (10⁶ keys
// at dim 1, 2.6·10⁷ floats at 10⁵ × 64). GCC's -O2 vectorises only loops
// of a constant trip count and simple operations, so both work in whole
// blocks of kScanBlock elements, then a scalar tail. Written as a compare
// to bool per float, the value scan stayed scalar: 20% of the server's time
// on a 10⁵ × 64 push.
constexpr uint64_t kScanBlock = 4096;
typedef uint32_t __attribute__((may_alias)) AliasedBits;

// Bit 31 set when one of the floats is NaN or infinite: a float is
// non-finite exactly when its exponent bits are all ones, and then
// (exponent bits) + 1 in the exponent's lowest place carries into bit 31,
// which no finite float's does.
inline uint32_t NonFiniteBits(const AliasedBits* u, uint64_t n) {
  uint32_t any = 0;
  for (uint64_t i = 0; i < n; ++i) any |= (u[i] & 0x7f800000u) + 0x00800000u;
  return any & 0x80000000u;
}

// Index of the first NaN or infinity among v[0, n), or n if there is none;
// the exact index is looked for only in a block that has one.
uint64_t FirstNonFinite(const float* v, uint64_t n) {
  const AliasedBits* u = reinterpret_cast<const AliasedBits*>(v);
  for (uint64_t b = 0; b < n; b += kScanBlock) {
    const uint64_t e = std::min(n, b + kScanBlock);
    if ((e - b == kScanBlock ? NonFiniteBits(u + b, kScanBlock) : NonFiniteBits(u + b, e - b)) == 0) continue;
    for (uint64_t i = b; i < e; ++i)
      if (!std::isfinite(v[i])) return i;
  }
  return n;
}

// Nonzero when keys[0, n) are not strictly increasing. An unsigned 64-bit
// compare has no SSE2 form, so its AVX2 clone (picked at load time) runs it
// 4 wide.
TETHER_SCAN_CLONES uint64_t KeysOutOfOrder(const uint64_t* keys, uint64_t n) {
  uint64_t bad = 0, i = 1;
  for (; i + kScanBlock <= n; i += kScanBlock) {
    const uint64_t* k = keys + i;
    for (uint64_t j = 0; j < kScanBlock; ++j) bad |= static_cast<uint64_t>(k[j] <= k[j - 1]);
  }
  for (; i < n; ++i) bad |= static_cast<uint64_t>(keys[i] <= keys[i - 1]);
  return bad;
}

// A routing identity for logs: workers name theirs "w<rank>-<pid>-<n>";
// ZeroMQ's own (a raw peer that set none) are binary, shown in hex.
std::string DescribeIdentity(const std::string& identity) {
  bool printable = !identity.empty();
  for (unsigned char ch : identity) printable = printable && ch >= 0x21 && ch < 0x7f;
  if (printable) return "'" + identity + "'";
  static const char kHex[] = "0123456789abcdef";
  std::string hex = "0x";
  for (unsigned char ch : identity) {
    hex += kHex[ch >> 4];
    hex += kHex[ch & 15];
  }
  return hex;
}

// The identity and, over tcp://, the address a message came from (ZeroMQ's
// "Peer-Address" property of a received frame).
std::string PeerName(const std::string& identity, Message& m) {
  const char* address = m.keys.handle() != nullptr ? zmq_msg_gets(m.keys.handle(), "Peer-Address") : nullptr;
  return DescribeIdentity(identity) + (address != nullptr ? std::string(" (from ") + address + ")" : "");
}

// The id of this shard's process (ServerShard::incarnation): 64 random
// bits, never 0 (0 means "none" on the wire).
uint64_t DrawIncarnation() {
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (uint64_t{rd()} << 32) ^ rd();
  return id;
}

std::string IncarnationHex(uint64_t id) {
  char hex[24];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(id));
  return hex;
}

}  // namespace

ServerShard::ServerShard(const JobConfig& config, int shard, zmq::context_t* context)
    : config_(config),
      shard_(shard),
      eval_book_(MaxWorkers(config.cluster())),
      chunks_("[server " + std::to_string(shard) + "] "),
      num_shards_(config.cluster().num_servers()),
      job_id_(JobId(config)),
      incarnation_(DrawIncarnation()),
      log_prefix_("[server " + std::to_string(shard) + "] "),
      clocks_(config.cluster().num_workers(), EffectiveStaleness(config.consistency())),
      workers_(config.cluster().num_workers()),
      initial_workers_(config.cluster().num_workers()),
      max_workers_(MaxWorkers(config.cluster())),
      own_ctx_(context == nullptr ? std::make_unique<zmq::context_t>(1) : nullptr),
      ctx_(context == nullptr ? own_ctx_.get() : context) {}

ServerShard::~ServerShard() {
  // Stop the monitor before the socket it watches closes (its PAIR end
  // closes first).
  if (monitor_.handle() != nullptr && socket_.handle() != nullptr) (void)zmq_socket_monitor(socket_.handle(), nullptr, 0);
}

Status ServerShard::Bind(const std::string& endpoint) {
  SocketOptions opts;
  opts.send_timeout_ms = config_.cluster().request_timeout_ms();
  opts.send_hwm = config_.cluster().send_hwm();
  opts.recv_hwm = config_.cluster().recv_hwm();
  if (const int liveness = config_.cluster().liveness_timeout_ms(); liveness > 0) {
    // A worker whose host vanished (no TCP close) loses its connection here
    // too, within liveness_timeout_ms, so that the worker restarted
    // elsewhere can claim its rank again (AdmitHello). The same bounds as
    // the workers' side (RequestChannel::Connect).
    opts.heartbeat_ivl_ms = std::max(25, liveness / 4);
    opts.heartbeat_timeout_ms = std::max(50, liveness);
  }
  size_t authorized = 0;
  if (config_.security().has_curve() && endpoint.rfind("inproc://", 0) != 0) {
    std::vector<std::string> keys;
    TETHER_ASSIGN_OR_RETURN(opts.curve, CurveServerOptions(config_.security().curve(), &keys));
    authorized = keys.size();
    // Running before the bind: libzmq admits every CURVE client while no
    // ZAP handler is there.
    TETHER_ASSIGN_OR_RETURN(zap_, ZapHandler::Start(*ctx_, keys, log_prefix_));
    opts.monitor_endpoint = "inproc://tether-server-monitor-" + std::to_string(reinterpret_cast<uintptr_t>(this));
    opts.monitor_events =
        ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
    try {
      monitor_ = zmq::socket_t(*ctx_, zmq::socket_type::pair);
      monitor_.set(zmq::sockopt::linger, 0);
      monitor_.connect(opts.monitor_endpoint);  // inproc allows connecting first
    } catch (const zmq::error_t& e) {
      return Status::IOError(log_prefix_ + "cannot watch the handshakes of " + endpoint + ": " + e.what());
    }
  }
  TETHER_ASSIGN_OR_RETURN(socket_, BindRouter(*ctx_, endpoint, opts, &endpoint_));
  if (opts.curve.enabled()) {
    LOG(INFO) << log_prefix_ << "CURVE on: traffic encrypted, " << authorized
              << " worker key(s) admitted (security.curve.authorized_keys), server public key "
              << opts.curve.public_key;
  } else if (const std::string warning = UnauthenticatedBindWarning("server " + std::to_string(shard_), endpoint_);
             !warning.empty()) {
    LOG(WARNING) << log_prefix_ << warning;
  }
  LOG(INFO) << log_prefix_ << "listening on " << endpoint_ << ", shard " << shard_ << "/" << num_shards_
            << " of job '" << job_id_ << "' generation " << config_.cluster().generation() << ", staleness "
            << StalenessName(clocks_.staleness()) << ", " << workers_.size()
            << " workers; tables come with worker 0's HELLO; process start id " << IncarnationHex(incarnation_);
  return Status::OK();
}

Status ServerShard::Run() {
  Status st = RunLoop();
  AnswerHeldByes(st);
  if (!st.ok()) FailWaitingRequests(st);
  if (tick_listener_) tick_listener_(true);
  return st;
}

void ServerShard::AnswerHeldByes(const Status& outcome) {
  if (held_byes_.empty()) return;
  for (const HeldBye& b : held_byes_) {
    Message reply;
    reply.header.set_type(outcome.ok() ? BYE_REPLY : ERROR_REPLY);
    reply.header.set_request_id(b.request_id);
    if (!outcome.ok()) reply.header.set_error(outcome.message());
    Reply(b.identity, &reply, b.rank);
  }
  if (!outcome.ok())
    LOG(INFO) << log_prefix_ << "told " << held_byes_.size() << " finished worker(s) that the job failed";
  held_byes_.clear();
  // The socket closes with the shard: give the replies a bounded time to
  // leave (its linger is 0 otherwise).
  try {
    socket_.set(zmq::sockopt::linger, 1000);
  } catch (const zmq::error_t&) {
  }
}

void ServerShard::FailWaitingRequests(const Status& why) {
  // The workers this shard holds waiting (a HELLO for worker 0's, a pull on
  // the staleness bound, the barrier, an evaluation gather) learn why the job ends, rather than
  // only that this shard's connection dropped.
  int told = 0;
  auto fail = [&](const std::string& identity, uint64_t request_id, int rank) {
    Message reply;
    reply.header.set_type(ERROR_REPLY);
    reply.header.set_request_id(request_id);
    reply.header.set_error(why.message());
    Reply(identity, &reply, rank);
    ++told;
  };
  for (const auto& [rank, p] : waiting_hellos_) fail(p.identity, p.request.header.request_id(), rank);
  for (const PendingPull& p : pending_) fail(p.identity, p.request.header.request_id(), p.request.header.sender_rank());
  for (size_t r = 0; r < workers_.size(); ++r) {
    const WorkerState& w = workers_[r];
    if (w.at_barrier && !w.identity.empty()) fail(w.identity, w.barrier_request, static_cast<int>(r));
  }
  for (const int64_t round : eval_book_.WaitingRounds())  // label counts and evaluations gathered on shard 0
    for (const EvalBook::Waiter& w : eval_book_.TakeWaiters(round)) fail(w.identity, w.request_id, w.rank);
  if (told == 0) return;
  LOG(INFO) << log_prefix_ << "told " << told << " waiting request(s) why the job ends";
  // The socket closes with the shard: give those replies a bounded time to
  // leave (its linger is 0 otherwise).
  try {
    socket_.set(zmq::sockopt::linger, 1000);
  } catch (const zmq::error_t&) {
  }
}

Status ServerShard::RunLoop() {
  const auto start = SteadyClock::now();
  auto last_message = start;
  bool any_hello = false;
  zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0}, {monitor_.handle(), 0, ZMQ_POLLIN, 0}};
  const size_t num_items = monitor_.handle() != nullptr ? 2 : 1;
  Message m;
  std::string identity;
  while (!stop_.load()) {
    try {
      zmq::poll(items, num_items, std::chrono::milliseconds(100));
    } catch (const zmq::error_t& e) {
      // A signal interrupted the poll: look at the stop flag it may have set.
      if (e.num() == EINTR) continue;
      return Status::IOError(log_prefix_ + "poll: " + e.what());
    }
    if (items[0].revents & ZMQ_POLLIN) {
      // Drain everything queued before going back to poll.
      while (true) {
        Status st = RecvMessage(socket_, &m, &identity);
        if (st.code() == Status::Code::kUnavailable) break;
        last_message = SteadyClock::now();
        if (!st.ok()) {
          ++stats_.bad_messages;
          LOG(ERROR) << log_prefix_ << st.message();
          if (!identity.empty()) ReplyError(identity, m.header, st.message());
          continue;
        }
        stats_.bytes_in += m.keys.size() + m.values.size();
        if (m.header.type() == HELLO) any_hello = true;
        Handle(identity, &m);
        if (!fatal_.ok()) return fatal_;
        // A drain can last long under load: the listener sees it too.
        if (tick_listener_) tick_listener_(false);
      }
    }
    if (num_items > 1 && (items[1].revents & ZMQ_POLLIN)) TakeHandshakeFailures();
    if (tick_listener_) tick_listener_(false);
    if (!load_failed_.ok()) {
      // HELLOs held for worker 0's are refused now; the shard ends once
      // every initial rank was told, or kLoadFailedLingerMs after the failure.
      for (auto& [rank, p] : waiting_hellos_) {
        LOG(ERROR) << log_prefix_ << "refusing worker " << rank << ": " << load_failed_why_;
        if (rank >= 0 && rank < initial_workers_) refusals_[rank] = load_failed_why_;
        ReplyError(p.identity, p.request.header, load_failed_why_);
      }
      waiting_hellos_.clear();
      // The last refusal is given half a second to reach its worker before
      // the socket closes (a worker that sees the shard disconnect first
      // would wait out its liveness timeout instead of reading why).
      int told = 0;
      for (int r = 0; r < initial_workers_; ++r) told += refusals_.count(r) > 0;
      // A rank that never comes (not started, or stopped by the others'
      // failure) holds it at most kLoadFailedLingerMs: the job cannot run
      // anyway, and whoever started this server by hand learns it now.
      if ((told == initial_workers_ && MsSince(last_message) > 500) || MsSince(load_failed_at_) > kLoadFailedLingerMs) {
        LOG(ERROR) << log_prefix_ << "told " << told << " of " << initial_workers_
                   << " worker(s) that this server could not load its checkpoint"
                   << (told < initial_workers_ ? "; not waiting for the others (" +
                                                     std::to_string(kLoadFailedLingerMs) + " ms since it failed)"
                                               : std::string());
        try {
          socket_.set(zmq::sockopt::linger, 1000);  // the refusals leave before the socket closes
        } catch (const zmq::error_t&) {
        }
        return load_failed_;
      }
      continue;
    }
    if (!aborted_.ok()) return aborted_;
    TETHER_RETURN_IF_ERROR(CheckWorkerTimeouts());
    bool all_gone = true;
    for (size_t r = 0; r < workers_.size(); ++r)
      all_gone = all_gone && (!Member(r) || workers_[r].said_bye || workers_[r].dead);
    if (all_gone) break;
    if (drain_requested_.load()) {
      // A stop that reached the whole job: serve the workers' stop
      // checkpoint and BYE first (StopAfterWorkers).
      int staying = 0;
      for (const auto& w : workers_) staying += w.said_hello && !w.said_bye && !w.dead;
      // Before every worker joined nobody trains (the first evaluation
      // exchange waits for all): there is no stop checkpoint to serve.
      int missing = 0;
      for (size_t r = 0; r < static_cast<size_t>(initial_workers_) && r < workers_.size(); ++r)
        missing += !workers_[r].said_hello;
      if (missing > 0 && staying > 0) {
        LOG(INFO) << log_prefix_ << "stop requested before " << missing
                  << " worker(s) joined: nothing to checkpoint, stopping now";
        break;
      }
      if (!drain_deadline_) {
        drain_deadline_ = SteadyClock::now() + std::chrono::milliseconds(drain_grace_ms_.load());
        checkpoint_before_stop_ = last_checkpoint_clock_;
        // The stop may have reached this server alone (a preempted node):
        // every worker is told now (and by each reply from here on), and
        // leaves as on its own stop signal, after a stop checkpoint when it
        // has a checkpoint dir (RequestChannel::server_stopping).
        for (const auto& w : workers_)
          if (w.said_hello && !w.said_bye && !w.dead) TellStopping(w.identity);
        if (drain_grace_ms_.load() > 0) {
          LOG(INFO) << log_prefix_ << "stop requested: asking " << staying
                    << " worker(s) to take a stop checkpoint and leave; serving them for up to "
                    << drain_grace_ms_.load() / 1000.0 << " s (tether-server --stop_grace_s)";
        } else {
          LOG(WARNING) << log_prefix_ << "stop requested: checkpoint.dir is not set, so the job ends without a "
                       << "checkpoint; told " << staying << " worker(s) to leave, stopping now";
          try {
            socket_.set(zmq::sockopt::linger, 1000);  // the workers are told before the socket closes
          } catch (const zmq::error_t&) {
          }
          break;
        }
      }
      if (staying == 0) break;
      if (SteadyClock::now() >= *drain_deadline_) {
        LOG(WARNING) << log_prefix_ << "stop requested: " << staying << " worker(s) still here after "
                     << drain_grace_ms_.load() / 1000.0 << " s (tether-server --stop_grace_s); stopping"
                     << (last_checkpoint_clock_ > checkpoint_before_stop_
                             ? std::string()
                             : " without a stop checkpoint (a resume starts from the latest complete one)");
        break;
      }
    }
    if (any_hello && !first_hello_ && !first_hello_done_) first_hello_ = SteadyClock::now();
    if (first_hello_ && MsSince(*first_hello_) > config_.cluster().startup_timeout_ms()) {
      // A rank that never joined holds every other worker at the staleness
      // bound (and the barrier) for good: the job cannot run without it.
      std::string missing;
      for (size_t r = 0; r < static_cast<size_t>(initial_workers_); ++r) {
        if (workers_[r].said_hello) continue;
        missing += (missing.empty() ? "" : "; ") + std::string("worker ") + std::to_string(r);
        auto why = refusals_.find(static_cast<int>(r));
        if (why != refusals_.end()) missing += " (refused: " + why->second + ")";
      }
      if (!missing.empty())
        return Status::DeadlineExceeded(log_prefix_ + "the job cannot run: " + missing + " did not join within " +
                                        "cluster.startup_timeout_ms=" +
                                        std::to_string(config_.cluster().startup_timeout_ms()) +
                                        " of the first worker's HELLO");
      first_hello_.reset();
      first_hello_done_ = true;
    }
    if (!any_hello && MsSince(start) > config_.cluster().startup_timeout_ms())
      return Status::DeadlineExceeded(log_prefix_ + "no worker said hello within cluster.startup_timeout_ms=" +
                                      std::to_string(config_.cluster().startup_timeout_ms()));
    if (MsSince(last_message) > config_.cluster().idle_timeout_ms())
      return Status::DeadlineExceeded(log_prefix_ + "no message for cluster.idle_timeout_ms=" +
                                      std::to_string(config_.cluster().idle_timeout_ms()) + "; workers gone?");
  }
  {
    bool any = false, all_finished = true;
    for (size_t r = 0; r < workers_.size(); ++r) {
      if (!workers_[r].said_hello) continue;
      any = true;
      all_finished = all_finished && workers_[r].finished && !workers_[r].dead;
    }
    job_finished_ = any && all_finished;
  }
  if (drain_requested_.load() && !stop_.load() && drain_deadline_) {
    bool gone = true;
    for (const auto& w : workers_) gone = gone && (!w.said_hello || w.said_bye || w.dead);
    if (job_finished_)
      LOG(INFO) << log_prefix_ << "stop requested, but every worker finished the job meanwhile";
    else if (gone && last_checkpoint_clock_ > checkpoint_before_stop_)
      LOG(INFO) << log_prefix_ << "stop requested: every worker has left after the stop checkpoint at clock "
                << last_checkpoint_clock_;
    else if (gone)
      LOG(WARNING) << log_prefix_ << "stop requested: every worker has left without a stop checkpoint (none has a "
                   << "checkpoint dir, or it was not reached): the job ends without one";
  }
  LOG(INFO) << log_prefix_ << "done: " << stats_.pulls << " pulls (" << stats_.rows_pulled << " rows, "
            << stats_.deferred_pulls << " waited on the bound), " << stats_.pushes << " pushes ("
            << stats_.rows_pushed << " rows, " << stats_.updates_applied << " updates applied), "
            << stats_.bytes_in / 1e6 << " MB in, " << stats_.bytes_out / 1e6
            << " MB out, " << stats_.bad_messages << " bad messages; staleness tau mean "
            << stats_.staleness.mean() << " max " << stats_.staleness.max << "; " << stats_.workers_timed_out
            << " workers timed out, " << stats_.workers_rejoined << " rejoined, " << stats_.workers_joined
            << " joined with a new rank";
  std::string held;  // rows of each row table at exit (hashed models: the distinct ids trained)
  for (const auto& t : tables_)
    if (IsRowTable(t->spec())) held += (held.empty() ? "" : ", ") + t->spec().name() + " " + std::to_string(t->num_rows());
  if (!held.empty()) LOG(INFO) << log_prefix_ << "rows held at exit: " << held;
  if (key_list_stats_.defined + key_list_stats_.unknown > 0)
    LOG(INFO) << log_prefix_ << "key lists: " << key_list_stats_.defined << " defined, " << key_list_stats_.used
              << " requests served from one, " << key_list_stats_.unknown << " named a list not held";
  const FramePool::Stats pool = reply_pool_.stats();
  LOG(INFO) << log_prefix_ << "reply frames: " << pool.takes << " pooled, " << pool.reuses << " reused, "
            << pool.maps << " mapped, " << pool.unmaps << " unmapped, " << pool.idle_bytes / 1e6 << " MB idle";
  if (stop_.load() || drain_requested_.load()) return Status::OK();
  // Every worker is gone, but a worker removed for silence never finished:
  // the job did not either, and the exit code must say so.
  std::string removed;
  for (size_t r = 0; r < workers_.size(); ++r)
    if (workers_[r].dead) removed += (removed.empty() ? "" : ", ") + std::to_string(r);
  bool data_done = chunks_.active() && chunks_.coordinator()->done();
  for (const auto& w : workers_) data_done = data_done || w.data_done;
  if (!removed.empty() && data_done) {
    // Data on demand: their chunks were dealt again and every row of every
    // epoch was completed.
    LOG(WARNING) << log_prefix_ << "worker(s) " << removed << " fell silent and never came back; data on demand "
                 << "dealt their chunks again and every epoch's rows were completed";
    return Status::OK();
  }
  if (!removed.empty())
    return Status::Unavailable(log_prefix_ + "the job did not finish: worker(s) " + removed +
                               " fell silent (cluster.worker_timeout_ms=" +
                               std::to_string(config_.cluster().worker_timeout_ms()) +
                               ") and never came back to reach the barrier or say BYE");
  return Status::OK();
}

void ServerShard::Reply(const std::string& identity, Message* reply, int rank) {
  stats_.bytes_out += reply->keys.size() + reply->values.size();
  reply->header.set_server_incarnation(incarnation_);
  // A reply's want_checkpoint: this shard was told to stop (TellStopping).
  if (drain_requested_.load()) reply->header.set_want_checkpoint(true);
  const std::string peer = rank >= 0 ? "worker " + std::to_string(rank) : "unregistered peer";
  Status st = SendMessage(socket_, reply, &identity, peer);
  if (!st.ok()) {
    ++stats_.send_failures;
    LOG(ERROR) << log_prefix_ << "reply " << TypeName(reply->header.type()) << " lost: " << st.message();
  }
}

void ServerShard::ReplyError(const std::string& identity, const MessageHeader& req, const std::string& error) {
  Message reply;
  reply.header.set_type(ERROR_REPLY);
  reply.header.set_request_id(req.request_id());
  reply.header.set_table_id(req.table_id());
  reply.header.set_error(log_prefix_ + error);
  Reply(identity, &reply, req.has_sender_rank() ? req.sender_rank() : -1);
}

Status ServerShard::CheckRequest(const std::string& identity, const Message& m) const {
  const MessageHeader& h = m.header;
  const std::string who = "worker " + std::to_string(h.sender_rank());
  if (h.sender_rank() < 0 || h.sender_rank() >= max_workers_)
    return Status::InvalidArgument("sender rank " + std::to_string(h.sender_rank()) + " outside [0, " +
                                   std::to_string(max_workers_) + ") (cluster.max_workers = " +
                                   std::to_string(max_workers_) +
                                   (config_.cluster().max_workers() > 0 ? "" : ", i.e. cluster.num_workers") +
                                   "; raise it to let more workers join)");
  if (h.sender_rank() >= static_cast<int>(workers_.size()) && h.type() != HELLO)
    return Status::FailedPrecondition(TypeName(h.type()) + " from worker " + std::to_string(h.sender_rank()) +
                                      " before its HELLO");
  const bool push = h.type() == PUSH || h.type() == PUSH_DELTA;
  if (h.type() != PULL && !push) return CheckPeer(identity, m);
  if (h.table_id() >= tables_.size())
    return Status::InvalidArgument(TypeName(h.type()) + " from " + who + ": unknown table id " +
                                   std::to_string(h.table_id()));
  const ServerTable& t = *tables_[h.table_id()];
  if (IsDenseTable(t.spec())) {
    const uint64_t n = t.dense_end() - t.dense_begin();
    if (h.num_keys() != 0) return Status::InvalidArgument("dense table " + t.spec().name() + " takes no keys");
    if (push && h.num_values() != n)
      return Status::InvalidArgument(TypeName(h.type()) + " from " + who + " to dense table " + t.spec().name() + " has " +
                                     std::to_string(h.num_values()) + " values; this shard holds " +
                                     std::to_string(n));
    return CheckPeer(identity, m);
  }
  if (h.value_dim() != t.spec().dim())
    return Status::InvalidArgument(TypeName(h.type()) + " from " + who + " for table " + t.spec().name() +
                                   ": value_dim " + std::to_string(h.value_dim()) + " but the table has dim " +
                                   std::to_string(t.spec().dim()));
  // num_keys is bounded by its frame's size (ValidateFrames), dim by the
  // config: the product cannot wrap, and the reply is sized from it.
  if (push && h.num_values() != h.num_keys() * t.spec().dim())
    return Status::InvalidArgument(TypeName(h.type()) + " from " + who + " for table " + t.spec().name() + ": " +
                                   std::to_string(h.num_values()) + " values for " + std::to_string(h.num_keys()) +
                                   " keys of dim " + std::to_string(t.spec().dim()));
  if (h.type() == PULL && h.num_keys() * t.spec().dim() * sizeof(float) > kMaxFrameBytes)
    return Status::InvalidArgument("PULL from " + who + " for table " + t.spec().name() + ": " +
                                   std::to_string(h.num_keys()) + " keys of dim " + std::to_string(t.spec().dim()) +
                                   " make a " + std::to_string(h.num_keys() * t.spec().dim() * sizeof(float)) +
                                   "-byte reply, above the " + std::to_string(kMaxFrameBytes) +
                                   "-byte message limit; split the keys over several pulls");
  // A request naming a cached key list without its keys: they were
  // checked when the list was defined (ResolveKeyList finds it).
  if (h.key_list() != 0 && m.keys.size() == 0) return CheckPeer(identity, m);
  std::vector<uint64_t> scratch;
  const uint64_t* keys = m.KeyData(&scratch);
  const uint64_t n = h.num_keys();
  // Both checks run once per key of every request (10^6 keys at dim 1):
  // first a branch-free pass that only says whether a key is out of order
  // or owned elsewhere, then the exact position only if one is.
  uint64_t bad = KeysOutOfOrder(keys, n);
  // With one shard every key is this shard's; no hash needed. For a power
  // of two, MixKey % S is MixKey & (S − 1): same owner, no division (the
  // division was half of this function's time at 2 shards).
  const uint64_t mask = static_cast<uint64_t>(num_shards_) - 1;
  if (num_shards_ > 1 && (num_shards_ & mask) == 0) {
    for (uint64_t i = 0; i < n; ++i) bad |= static_cast<uint64_t>((MixKey(keys[i]) & mask) != static_cast<uint64_t>(shard_));
  } else if (num_shards_ > 1) {
    for (uint64_t i = 0; i < n; ++i) bad |= static_cast<uint64_t>(ShardForKey(keys[i], num_shards_) != shard_);
  }
  for (uint64_t i = 0; bad != 0 && i < n; ++i) {
    if (i > 0 && keys[i] <= keys[i - 1])
      return Status::InvalidArgument(TypeName(h.type()) + " from " + who + " for table " + t.spec().name() +
                                     ": keys not sorted and unique at position " + std::to_string(i));
    if (ShardForKey(keys[i], num_shards_) != shard_)
      return Status::InvalidArgument(TypeName(h.type()) + " from " + who + ": key " + std::to_string(keys[i]) +
                                     " of table " + t.spec().name() + " belongs to shard " +
                                     std::to_string(ShardForKey(keys[i], num_shards_)));
  }
  // Sorted by now, so the last key is the largest: one comparison checks
  // the table's key range (TableSpec.num_keys; 0 = any key).
  const uint64_t num_keys = t.spec().num_keys();
  if (num_keys != 0 && n > 0 && keys[n - 1] >= num_keys)
    return Status::InvalidArgument(TypeName(h.type()) + " from " + who + ": key " + std::to_string(keys[n - 1]) +
                                   " of table " + t.spec().name() + " is outside its key range [0, " +
                                   std::to_string(num_keys) + ")");
  return CheckPeer(identity, m);
}

Status ServerShard::CheckPeer(const std::string& identity, const Message& m) const {
  const MessageHeader& h = m.header;
  if (h.type() == PUSH && h.has_push_weight() && !(std::isfinite(h.push_weight()) && h.push_weight() > 0))
    return Status::InvalidArgument("PUSH from worker " + std::to_string(h.sender_rank()) + ": push_weight " +
                                   std::to_string(h.push_weight()) + " must be a finite number > 0; nothing applied");
  if (h.type() == PUSH || h.type() == PUSH_DELTA) {
    // No non-finite value ever reaches a table (case C08): one NaN would
    // spread to every worker that pulls the row.
    std::vector<float> scratch;
    const float* v = m.ValueData(&scratch);
    const uint64_t i = FirstNonFinite(v, h.num_values());
    if (i < h.num_values()) {
      const ServerTable& t = *tables_[h.table_id()];
      std::string where = "value " + std::to_string(i);
      if (IsRowTable(t.spec()) && m.keys.size() == 0) {
        where += " (row " + std::to_string(i / t.spec().dim()) + " of key list " + std::to_string(h.key_list()) +
                 ", column " + std::to_string(i % t.spec().dim()) + ")";
      } else if (IsRowTable(t.spec())) {
        std::vector<uint64_t> key_scratch;
        where += " (key " + std::to_string(m.KeyData(&key_scratch)[i / t.spec().dim()]) + ", column " +
                 std::to_string(i % t.spec().dim()) + ")";
      }
      return Status::InvalidArgument(TypeName(h.type()) + " from worker " + std::to_string(h.sender_rank()) + " to table " +
                                     t.spec().name() + ": " + where + " is " + (std::isnan(v[i]) ? "NaN" : "infinite") +
                                     "; nothing applied");
    }
  }
  // Only the peer that said HELLO as rank r may speak for rank r: a stray
  // or confused peer must not move r's clock or pull under r's bound.
  if (h.type() != HELLO) {
    const WorkerState& w = workers_[h.sender_rank()];
    if (!w.said_hello)
      return Status::FailedPrecondition(TypeName(h.type()) + " from worker " + std::to_string(h.sender_rank()) +
                                        " before its HELLO");
    if (w.identity != identity)
      return Status::FailedPrecondition(TypeName(h.type()) + " claims to come from worker " +
                                        std::to_string(h.sender_rank()) + ", which joined from another connection");
  }
  return Status::OK();
}

void ServerShard::Handle(const std::string& identity, Message* m) {
  const MessageHeader& h = m->header;
  if (h.type() == HEARTBEAT && waiting_hellos_.count(h.sender_rank()) != 0) return;  // still joining
  if (h.type() == ABORT && h.server_incarnation() != 0 && h.server_incarnation() != incarnation_ &&
      h.job_id() == job_id_ && h.generation() == config_.cluster().generation()) {
    // A worker of this job failed, and it had joined another process on
    // this shard's address: this one replaced it (killed and started again
    // by hand) and the job it would serve is gone. It ends too, rather than
    // wait cluster.startup_timeout_ms for a HELLO that never comes.
    if (aborted_.ok() && load_failed_.ok())
      aborted_ = Status::Unavailable(log_prefix_ + "job aborted: " + h.error() + " (this server, process start id " +
                                     IncarnationHex(incarnation_) + ", replaced the one worker " +
                                     std::to_string(h.sender_rank()) + " had joined, start id " +
                                     IncarnationHex(h.server_incarnation()) + ")");
    return;
  }
  Status st = CheckRequest(identity, *m);
  if (!st.ok()) {
    ++stats_.bad_messages;
    LOG(ERROR) << log_prefix_ << st.message();
    ReplyError(identity, h, st.message());
    return;
  }
  const int rank = h.sender_rank();
  // A HELLO from a rank beyond the slots held so far (a joiner, within
  // max_workers: CheckRequest): its slot counts for nothing until admitted.
  if (rank >= static_cast<int>(workers_.size())) workers_.resize(static_cast<size_t>(rank) + 1);
  WorkerState& w = workers_[rank];
  w.last_seen = std::chrono::steady_clock::now();
  if (h.type() == ABORT) {
    // A worker failed and says so (not one removed for silence, which only
    // leaves: RunWorker): the job cannot finish, and this shard ends with
    // that worker's reason. Run() returns it, and the caller logs it
    // (tools/server_main.cc).
    // A shard that failed to load its checkpoint is the cause: it stays to
    // tell the workers still to come (their ABORTs follow its refusals).
    if (aborted_.ok() && load_failed_.ok()) aborted_ = Status::Unavailable(log_prefix_ + "job aborted: " + h.error());
    return;
  }
  if (w.dead && h.type() != HELLO) {
    // A worker declared dead must rejoin with HELLO; until then its
    // messages would corrupt the clock bookkeeping.
    ++stats_.bad_messages;
    ReplyError(identity, h, "worker " + std::to_string(rank) + " " + w.removed_why +
                                "; only a HELLO (the worker started again) takes its place back");
    return;
  }
  if ((h.type() == PULL || h.type() == PUSH) && config_.cluster().debug_request_delay_ms() > 0) {
    // Test/debug only: a slow server, so that the queues in front of it fill
    // (case C13, tests/transport_test.cc).
    std::this_thread::sleep_for(std::chrono::milliseconds(config_.cluster().debug_request_delay_ms()));
  }
  switch (h.type()) {
    case HELLO: {
      if (!AdmitHello(identity, m)) return;
      // A resumed job starts every worker at the checkpoint's clock.
      int64_t start_clock = std::max<int64_t>(0, resume_clock_);
      int64_t rejoin_clock = -1;
      if (w.said_hello) {
        // A worker rejoining (after a crash or a timeout) starts at the
        // slowest live clock, so nobody waits for clocks it will never
        // replay, and pulls fresh rows (its cache starts empty).
        start_clock = clocks_.StartClock(rank);
        rejoin_clock = clocks_.clock(rank);
        ++stats_.workers_rejoined;
        chunks_.Leave(rank);  // the new process holds none of the old one's chunks
        LOG(WARNING) << log_prefix_ << "worker " << rank << " rejoined at clock " << start_clock
                     << " (was at " << clocks_.clock(rank) << (w.dead ? ", timed out" : "") << ")";
      } else if (rank >= initial_workers_) {
        // A new rank joining the running job (elastic membership): like a
        // rejoin, it starts at the slowest clock that counts, and from then
        // on counts in the bound (docs/CONSISTENCY.md "Joining and leaving").
        start_clock = std::max(start_clock, clocks_.StartClock(rank));
        ++stats_.workers_joined;
        LOG(INFO) << log_prefix_ << "worker " << rank << " joined the running job at clock " << start_clock
                  << " (beyond the " << initial_workers_ << " initial worker(s); cluster.max_workers " << max_workers_
                  << ")";
      } else {
        LOG(INFO) << log_prefix_ << "worker " << rank << " joined";
      }
      if (w.said_hello) DropAverageDeltas(rank, "rejoined");
      w = WorkerState();
      key_lists_.erase(rank);  // a (re)joining worker's client starts with no lists
      key_lists_.emplace(rank, KeyListCache(key_list_bytes_per_worker()));
      w.said_hello = true;
      w.identity = identity;
      w.joined_clock = start_clock;
      w.last_seen = std::chrono::steady_clock::now();
      if (clocks_.Join(rank, start_clock)) ServeReadyPulls();
      ForgetAdaptiveBatch(rank);
      Message reply;
      reply.header.set_type(HELLO_REPLY);
      reply.header.set_request_id(h.request_id());
      reply.header.set_clock(start_clock);
      if (rejoin_clock >= 0) reply.header.set_rejoin_clock(rejoin_clock);
      reply.header.set_min_clock(clocks_.min_clock());
      reply.header.set_shard(shard_);
      reply.header.set_num_shards(num_shards_);
      reply.header.set_job_id(job_id_);
      reply.header.set_generation(config_.cluster().generation());
      reply.header.set_protocol_version(kProtocolVersion);
      if (key_list_bytes_per_worker() > 0) reply.header.set_key_list_cache_bytes(key_list_bytes_per_worker());
      Reply(identity, &reply, rank);
      if (!waiting_hellos_.empty()) AdmitWaitingHellos();
      MaybeWriteCheckpoint();  // a round this process cannot take part in ends
      return;
    }
    case PULL: {
      // A key list is resolved on arrival, also for a pull that then waits:
      // the worker's mirror of the kept lists follows the send order.
      KeyListCache::List offsets;
      if (!ResolveKeyList(identity, *m, &offsets)) return;
      ++stats_.pulls;
      if (clocks_.PullReady(h.clock(), tables_[h.table_id()]->staleness())) {
        ServePull(identity, *m, offsets.get());
      } else {
        ++stats_.deferred_pulls;
        VLOG(2) << log_prefix_ << "pull from worker " << rank << " at clock " << h.clock()
                << " waits: min_clock " << clocks_.min_clock();
        pending_.push_back({identity, std::move(*m), std::chrono::steady_clock::now(), std::move(offsets)});
      }
      return;
    }
    case PUSH: {
      KeyListCache::List offsets;
      if (!ResolveKeyList(identity, *m, &offsets)) return;
      ApplyPush(identity, *m, offsets.get());
      return;
    }
    case PUSH_DELTA:
      AddDelta(identity, *m);
      return;
    case CLOCK: {
      // AVERAGE: the CLOCK ending a round carries the sender's weight; its
      // deltas join the round before the round can close (Advance below).
      if (averager_ != nullptr) {
        if (Status st = averager_->Complete(rank, h.clock() - 1, h.average_updates()); !st.ok())
          LOG(ERROR) << log_prefix_ << st.message();
      }
      if (clocks_.Advance(rank, h.clock())) {
        ServeReadyPulls();
        if (clock_listener_) clock_listener_(clocks_.min_clock());
      }
      if (shard_ != 0) return;
      // Shard 0 picks the clock of a requested checkpoint (rank 0's
      // every_seconds, or a graceful stop): two past the largest clock any
      // worker has reported here. A worker waits for the answer to its
      // previous CLOCK before it works at a new clock (WorkerClient::Clock),
      // so one that reported clock L can work at L + 1 unaware, but not at
      // L + 2 without this answer: every worker learns the clock before it
      // gets there, whatever the staleness bound.
      if (h.want_checkpoint() && due_checkpoint_clock_ < 0) {
        int64_t latest = 0;
        for (int r = 0; r < clocks_.num_workers(); ++r)
          if (clocks_.Counts(r)) latest = std::max(latest, clocks_.clock(r));
        due_checkpoint_clock_ = std::max(latest + 2, last_checkpoint_clock_ + 1);
        LOG(INFO) << log_prefix_ << "worker " << rank << " asked for a checkpoint: every worker takes it at clock "
                  << due_checkpoint_clock_;
      }
      Message reply;
      reply.header.set_type(CLOCK_REPLY);
      reply.header.set_request_id(h.request_id());
      reply.header.set_min_clock(clocks_.min_clock());
      if (due_checkpoint_clock_ >= 0) reply.header.set_checkpoint_clock(due_checkpoint_clock_);
      if (h.has_adaptive_batch()) {
        if (Status ab = ReportAdaptiveBatch(rank, h.adaptive_batch(), &reply.header); !ab.ok()) {
          ++stats_.bad_messages;
          LOG(ERROR) << log_prefix_ << ab.message();
          ReplyError(identity, h, ab.message());
          return;
        }
      }
      Reply(identity, &reply, rank);
      return;
    }
    case CHECKPOINT:
      HandleCheckpoint(identity, *m);
      return;
    case BARRIER: {
      w.at_barrier = true;
      w.identity = identity;
      w.samples = h.samples();
      w.barrier_request = h.request_id();
      w.stats = h.worker_stats();
      w.finished_entry = h.finished();
      w.finished = true;
      w.data_done = h.has_chunk() && h.chunk().kind() == DataOnDemandChunk::DONE;
      if (clocks_.Remove(rank)) ServeReadyPulls();
      ForgetAdaptiveBatch(rank);
      MaybeReleaseBarrier();
      MaybeWriteCheckpoint();
      return;
    }
    case BYE: {
      w.said_bye = true;
      key_lists_.erase(rank);
      // A worker leaving early (a stop request) may leave pulls parked on
      // the bound: nobody is there to take their replies any more.
      pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                    [&](const PendingPull& p) { return p.identity == identity; }),
                     pending_.end());
      DropAverageDeltas(rank, "left");
      if (clocks_.Remove(rank)) ServeReadyPulls();
      ForgetAdaptiveBatch(rank);
      chunks_.Leave(rank);
      LOG(INFO) << log_prefix_ << "worker " << rank << " left";
      if (w.finished) {
        // It finished (passed the barrier): its goodbye is answered with
        // the job's outcome once this shard's part of the job ends, so it
        // exits non-zero when the job fails after it (a worker removed
        // during the evaluation). Every worker left by then: no wait.
        held_byes_.push_back({identity, h.request_id(), rank});
      } else {
        // Leaving early on purpose (a stop, elastic): no outcome to wait for.
        Message reply;
        reply.header.set_type(BYE_REPLY);
        reply.header.set_request_id(h.request_id());
        Reply(identity, &reply, rank);
      }
      MaybeReleaseBarrier();
      MaybeWriteCheckpoint();
      AnswerEvalWaiters();
      return;
    }
    case HEARTBEAT:
      return;
    case EVAL_GATHER:
      HandleEvalGather(identity, *m);
      return;
    case CHUNK_NEXT:
      HandleChunkNext(identity, *m);
      return;
    case STATS: {
      Message reply;
      reply.header.set_type(STATS_REPLY);
      reply.header.set_request_id(h.request_id());
      *reply.header.mutable_shard_stats() = SnapshotStats();
      Reply(identity, &reply, rank);
      return;
    }
    default:
      ++stats_.bad_messages;
      ReplyError(identity, h, "unexpected message type " + TypeName(h.type()));
  }
}

bool ServerShard::AdmitHello(const std::string& identity, Message* m) {
  const MessageHeader& h = m->header;
  const int rank = h.sender_rank();
  const std::string who = "worker " + std::to_string(rank);
  auto refuse = [&](const std::string& why) {
    LOG(ERROR) << log_prefix_ << "refusing " << who << ": " << why;
    if (rank >= 0 && rank < initial_workers_ && !workers_[rank].said_hello) refusals_[rank] = why;
    ReplyError(identity, h, why);
    return false;
  };
  // This shard could not load its checkpoint: every worker is told so.
  if (!load_failed_.ok()) return refuse(load_failed_why_);
  // Who is talking to whom (case C26): the same protocol, the same job and
  // generation, and this shard where the worker's list puts it.
  if (h.protocol_version() != kProtocolVersion)
    return refuse("protocol version differs: " + who + " speaks version " + std::to_string(h.protocol_version()) +
                  ", server " + std::to_string(shard_) + " speaks version " + std::to_string(kProtocolVersion) +
                  " (run the same Tether build on both sides)");
  if (h.job_id() != job_id_ || h.generation() != config_.cluster().generation())
    return refuse("job differs: " + who + " is of job '" + h.job_id() + "' generation " +
                  std::to_string(h.generation()) + ", server " + std::to_string(shard_) + " serves job '" + job_id_ +
                  "' generation " + std::to_string(config_.cluster().generation()) +
                  " (cluster.job_id / cluster.generation, or the config's name)");
  if (h.shard() != shard_ || h.num_shards() != num_shards_)
    return refuse("server " + endpoint_ + " is shard " + std::to_string(shard_) + " of " +
                  std::to_string(num_shards_) + " but " + who + " lists it as shard " + std::to_string(h.shard()) +
                  " of " + std::to_string(h.num_shards()) + " in --server_addresses");
  if (h.has_consistency_model() &&
      (h.consistency_model() == AVERAGE) != (config_.consistency().model() == AVERAGE))
    return refuse("consistency model differs: " + who + " trains with " +
                  ConsistencyModel_Name(h.consistency_model()) + ", server " + std::to_string(shard_) + " with " +
                  ConsistencyModel_Name(config_.consistency().model()) +
                  " (consistency.model / --consistency_model must be the same on every server and worker)");
  if (h.has_data_on_demand()) {
    if (!hello_data_on_demand_.has_value()) {
      hello_data_on_demand_ = h.data_on_demand();
    } else if (*hello_data_on_demand_ != h.data_on_demand()) {
      auto mode = [](bool on) { return std::string(on ? "draws its rows on demand" : "trains its static split"); };
      return refuse("train.data_on_demand differs: " + who + " " + mode(h.data_on_demand()) +
                    ", the job's workers so far " + mode(*hello_data_on_demand_) +
                    " (give every worker the same --data_on_demand: mixed, rows would be trained twice)");
    }
  }
  if (h.has_train_epochs()) {
    if (!hello_epochs_.has_value()) {
      hello_epochs_ = h.train_epochs();
    } else if (*hello_epochs_ != h.train_epochs()) {
      return refuse("train.epochs differs: " + who + " trains " + std::to_string(h.train_epochs()) +
                    " epoch(s), the job's workers so far " + std::to_string(*hello_epochs_) +
                    " (give every worker the same --epochs)");
    }
  }
  if (h.staleness() != clocks_.staleness())
    return refuse("staleness differs: " + who + " has " + StalenessName(h.staleness()) + ", server " +
                  std::to_string(shard_) + " has " + StalenessName(clocks_.staleness()));
  // One rank, one connection: a HELLO for a rank that another
  // connection holds is a second claim, refused while that connection is
  // live, so a stray or hostile process cannot take over a working rank's
  // clock and updates. A worker restarted after a crash comes on a new
  // connection once the old one is gone (its TCP connection closed with the
  // process; a vanished host's is closed by the ZMTP heartbeats within
  // cluster.liveness_timeout_ms), and rejoins as before.
  const std::string* holder = nullptr;
  if (rank >= 0 && rank < static_cast<int>(workers_.size()) && workers_[rank].said_hello && !workers_[rank].said_bye)
    holder = &workers_[rank].identity;
  auto waiting = waiting_hellos_.find(rank);
  if (waiting != waiting_hellos_.end()) holder = &waiting->second.identity;
  if (holder != nullptr && *holder != identity && ConnectionLive(*holder)) {
    const std::string held_by = *holder;
    LOG(ERROR) << log_prefix_ << "second claim on " << who << " refused: connection " << PeerName(identity, *m)
               << " says HELLO as " << who << ", which connection " << DescribeIdentity(held_by)
               << " holds and is still live";
    ReplyError(identity, h, who + " is already connected to server " + std::to_string(shard_) +
                                " from another connection that is still live: a second claim on a rank is refused "
                                "(a restarted worker rejoins once its old connection is gone, within "
                                "cluster.liveness_timeout_ms=" +
                                std::to_string(config_.cluster().liveness_timeout_ms()) + " for a vanished host)");
    return false;
  }
  if (tables_.empty()) {
    if (rank != 0) {
      // Worker 0 defines the job's tables (the authority), so two shards
      // can never adopt different tables because different workers reached
      // them first: this HELLO waits for worker 0's.
      if (waiting_hellos_.count(rank) == 0)
        LOG(INFO) << log_prefix_ << who << " waits for worker 0, whose HELLO defines the job's tables";
      waiting_hellos_[rank] = {identity, std::move(*m), SteadyClock::now(), nullptr};
      return false;
    }
    std::vector<TableSpec> specs(h.tables().begin(), h.tables().end());
    if (specs.empty()) return refuse("worker 0 declared no tables");
    const Status valid = ValidateTableSpecs(specs, num_shards_);
    if (!valid.ok()) return refuse("worker 0 declared a bad table: " + valid.message());
    // Tables this shard cannot hold fail the job now, naming the sizes,
    // rather than the shard running out of memory mid-training.
    const Status fits = CheckShardFits(specs, shard_, num_shards_, MemoryBudgetFor(config_));
    if (!fits.ok()) {
      fatal_ = fits;
      return refuse(fits.message());
    }
    if (!h.resume_from().empty() || !resume_from_.empty()) {
      const std::string why = Resume(h);
      if (!why.empty()) return refuse(why);
    } else {
      DefineTables(h.tables());
    }
    // Worker 0's HELLO is answered first (below); the waiting ones after it.
    return true;
  }
  if (h.resume_clock() != resume_clock_)
    return refuse("resume differs: " + who + (h.resume_from().empty() ? " starts afresh" : " resumes from " +
                  h.resume_from() + " at clock " + std::to_string(h.resume_clock())) + ", the job " +
                  (resume_clock_ < 0 ? "started afresh" : "resumed at clock " + std::to_string(resume_clock_)) +
                  " (give every worker the same --resume_from)");
  const std::string diff = DiffTableSpecs(h.tables(), who, job_tables_, "the job (from worker 0)");
  if (!diff.empty()) return refuse("tables differ: " + diff);
  return true;
}

void ServerShard::TakeHandshakeFailures() {
  while (true) {
    zmq::message_t event, address;
    try {
      if (!monitor_.recv(event, zmq::recv_flags::dontwait)) return;
      if (event.more()) (void)monitor_.recv(address, zmq::recv_flags::dontwait);
    } catch (const zmq::error_t&) {
      return;
    }
    if (event.size() < 6) continue;
    uint16_t id;
    uint32_t value;
    std::memcpy(&id, event.data(), sizeof(id));
    std::memcpy(&value, static_cast<const char*>(event.data()) + 2, sizeof(value));
    ++handshakes_refused_;
    // The ZAP handler has logged a refused key already, with its address.
    if (id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) continue;
    // A refused peer's ZeroMQ reconnects every 100 ms or so: log the 1st,
    // 10th, 100th ... failure.
    const uint64_t n = ++handshake_failures_logged_;
    uint64_t p = 1;
    while (p < n) p *= 10;
    if (p != n) continue;
    char code[16];
    std::snprintf(code, sizeof(code), "0x%x", value);
    LOG(WARNING) << log_prefix_ << "refused a connection on " << endpoint_
                 << ": its CURVE handshake failed ("
                 << (id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ? std::string("protocol error ") + code
                                                               : std::string("no detail, errno ") + std::to_string(value))
                 << "): a peer without CURVE (plain frames) or without this server's public key "
                 << "(security.curve.server_public_key_file)" << (n > 1 ? " (" + std::to_string(n) + " times)" : "");
  }
}

void ServerShard::TellStopping(const std::string& identity) {
  // A HEARTBEAT whose want_checkpoint says this shard was told to stop
  // (RequestChannel::DrainReplies reads it before dropping the probe).
  Message probe;
  probe.header.set_type(HEARTBEAT);
  probe.header.set_server_incarnation(incarnation_);
  probe.header.set_want_checkpoint(true);
  if (Status st = SendMessage(socket_, &probe, &identity, "worker"); !st.ok())
    LOG(WARNING) << log_prefix_ << "could not tell a worker of the stop: " << st.message();
}

bool ServerShard::ConnectionLive(const std::string& identity) {
  // A HEARTBEAT the worker drops (RequestChannel::DrainReplies). With
  // ROUTER_MANDATORY the identity frame fails with EHOSTUNREACH once the
  // peer's connection is gone; a full queue (EAGAIN) means it is there.
  MessageHeader probe;
  probe.set_type(HEARTBEAT);
  probe.set_server_incarnation(incarnation_);
  const std::string header = probe.SerializeAsString();
  try {
    if (!socket_.send(zmq::buffer(identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return true;
    (void)socket_.send(zmq::buffer(header), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    (void)socket_.send(zmq::const_buffer(nullptr, 0), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    (void)socket_.send(zmq::const_buffer(nullptr, 0), zmq::send_flags::dontwait);
    return true;
  } catch (const zmq::error_t& e) {
    return e.num() != EHOSTUNREACH;
  }
}

void ServerShard::DefineTables(const google::protobuf::RepeatedPtrField<TableSpec>& specs) {
  job_tables_ = specs;
  // AVERAGE (ValidateJobConfig makes it job-wide): the tables take merged
  // deltas as they are (SUM, no optimizer state here: the job's optimizer
  // runs on the workers' replicas), and the averager merges the rounds.
  const bool average = !specs.empty() && specs[0].consistency().model() == AVERAGE;
  for (const TableSpec& spec : specs) {
    uint64_t begin = 0, end = 0;
    if (IsDenseTable(spec)) std::tie(begin, end) = DenseRange(spec.size(), shard_, num_shards_);
    if (!average) {
      tables_.push_back(std::make_unique<ServerTable>(spec, begin, end));
      continue;
    }
    TableSpec merged = spec;
    merged.mutable_optimizer()->Clear();
    merged.mutable_optimizer()->set_type(SUM);
    tables_.push_back(std::make_unique<ServerTable>(merged, begin, end));
  }
  if (average) {
    averager_ = std::make_unique<ModelAverager>(specs[0].consistency().model_momentum());
    LOG(INFO) << log_prefix_ << "consistency AVERAGE: merging the workers' deltas per round, model momentum "
              << specs[0].consistency().model_momentum();
  }
  LOG(INFO) << log_prefix_ << "tables from worker 0: " << DescribeTables(specs);
}

std::string ServerShard::LoadFailed(const std::string& why) {
  load_failed_ = Status::DataLoss(log_prefix_ + why);
  load_failed_why_ = why;
  load_failed_at_ = SteadyClock::now();
  return why;
}

std::string ServerShard::Resume(const MessageHeader& h) {
  const auto start = SteadyClock::now();
  if (h.resume_from().empty())
    return "server " + std::to_string(shard_) + " resumes from " + resume_from_ +
           " (--resume_from) but worker 0 starts afresh: give worker 0 the same --resume_from";
  std::string dir = h.resume_from();
  if (!resume_from_.empty()) {
    StatusOr<std::string> local = ResolveCheckpoint(resume_from_);
    if (!local.ok()) return LoadFailed(local.status().message());
    dir = *local;
  }
  StatusOr<CheckpointManifest> m = ReadManifest(dir);
  if (!m.ok()) return LoadFailed("cannot resume: " + m.status().message());
  if (m->clock() != h.resume_clock())
    return "worker 0 resumes at clock " + std::to_string(h.resume_clock()) + " but the checkpoint this server reads (" +
           dir + ") is at clock " + std::to_string(m->clock());
  const std::string diff = DiffTableShapes(m->tables(), h.tables());
  if (!diff.empty()) return "cannot resume from " + dir + ": " + diff;
  DefineTables(h.tables());
  const Status st = RestoreShardTables(dir, *m, shard_, num_shards_, &tables_);
  if (!st.ok()) {
    return LoadFailed("cannot resume: server " + std::to_string(shard_) + " failed to load its part of " + dir + ": " +
                      st.message());
  }
  if (const std::string why = ResumeChunkState(dir, *m); !why.empty()) return why;
  resume_clock_ = m->clock();
  last_checkpoint_clock_ = m->clock();
  for (int r = 0; r < clocks_.num_workers(); ++r) clocks_.Rejoin(r, resume_clock_);
  uint64_t rows = 0;
  for (const auto& t : tables_) rows += t->num_rows();
  LOG(INFO) << log_prefix_ << "resumed from " << dir << " (clock " << resume_clock_ << ", written by "
            << m->num_servers() << " server(s) and " << m->num_workers() << " worker(s)): " << rows
            << " rows in " << std::chrono::duration<double>(SteadyClock::now() - start).count() << " s";
  return "";
}

void ServerShard::HandleCheckpoint(const std::string& identity, const Message& m) {
  const MessageHeader& h = m.header;
  const int rank = h.sender_rank();
  if (round_.clock < 0) {
    round_.clock = h.checkpoint_clock();
    round_.final = h.checkpoint_final();
    round_.dir = h.checkpoint_dir();
  } else if (h.checkpoint_clock() != round_.clock || h.checkpoint_dir() != round_.dir) {
    ++stats_.bad_messages;
    ReplyError(identity, h, "CHECKPOINT from worker " + std::to_string(rank) + " at clock " +
                                std::to_string(h.checkpoint_clock()) + " (" + h.checkpoint_dir() +
                                ") while the one at clock " + std::to_string(round_.clock) + " (" + round_.dir +
                                ") is in progress");
    return;
  }
  round_.waiting[rank] = {identity, h.request_id()};
  if (h.checkpoint_files_size() > 0) round_.files[rank] = h.checkpoint_files(0);
  MaybeWriteCheckpoint();
}

void ServerShard::MaybeWriteCheckpoint() {
  if (round_.clock < 0) return;
  // A rank whose process started at or past the cut (restarted by hand or
  // joined while the round was pending) never sends its state for it: a
  // worker takes a checkpoint only on reaching a clock, and the HELLO can
  // reach one shard before or after the round's first CHECKPOINT, or name
  // a lower clock than the worker then runs at (it passes the cut without
  // a CHECKPOINT). The round cannot complete: it is abandoned, the workers
  // waiting at it train on, and its folder never gets a MANIFEST.
  if (!round_.final) {
    for (int r = 0; r < clocks_.num_workers(); ++r) {
      if (!clocks_.Counts(r) || round_.waiting.count(r) > 0) continue;
      const WorkerState& w = workers_[r];
      if (w.joined_clock < round_.clock && clocks_.clock(r) <= round_.clock) continue;
      AbandonCheckpoint("worker " + std::to_string(r) + " was restarted before it wrote its state (its process started at clock " +
                        std::to_string(w.joined_clock) + ")");
      return;
    }
  }
  // Every worker still training must be at the cut; one that has finished
  // (barrier), left or was removed has nothing more to apply.
  for (int r = 0; r < clocks_.num_workers(); ++r)
    if (clocks_.Counts(r) && round_.waiting.count(r) == 0) return;
  const auto start = SteadyClock::now();
  CheckpointFile file;
  // The manifest is written by the lowest rank in the round
  // (ManifestWriterRank): worker 0 when it is still training, else the
  // next one, so a cut after worker 0 finished its share (or left) is
  // still completed.
  Status st = tables_.empty() ? Status::FailedPrecondition("no tables defined yet")
                              : WriteShardCheckpoint(FileSystem::Default(), round_.dir, shard_, num_shards_,
                                                     round_.clock, tables_, &file);
  // Data on demand: shard 0's dealing state, in this same turn of the loop
  // as its rows (checkpoint/chunk_state.h says why the two agree).
  CheckpointFile chunk_file;
  if (st.ok()) st = WriteChunkStateIfDealing(&chunk_file);
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  if (st.ok()) {
    LOG(INFO) << log_prefix_ << "checkpoint at clock " << round_.clock << (round_.final ? " (final)" : "") << ": "
              << round_.dir << "/" << file.name() << ", " << file.bytes() / 1e6 << " MB in " << seconds << " s ("
              << file.bytes() / 1e6 / std::max(seconds, 1e-9) << " MB/s)";
  } else {
    LOG(ERROR) << log_prefix_ << "checkpoint at clock " << round_.clock << " failed: " << st.message();
  }
  for (const auto& [rank, peer] : round_.waiting) {
    MessageHeader req;
    req.set_request_id(peer.second);
    req.set_sender_rank(rank);
    if (!st.ok()) {
      ReplyError(peer.first, req, "checkpoint at clock " + std::to_string(round_.clock) + ": " + st.message());
      continue;
    }
    Message reply;
    reply.header.set_type(CHECKPOINT_REPLY);
    reply.header.set_request_id(peer.second);
    reply.header.set_checkpoint_clock(round_.clock);
    *reply.header.add_checkpoint_files() = file;
    if (chunk_file.has_name()) *reply.header.add_checkpoint_files() = chunk_file;
    if (shard_ == 0) {
      for (int r = 0; r < static_cast<int>(workers_.size()); ++r) {
        if (!Member(r)) continue;  // a joiner's slot that was never taken
        CheckpointWorker* e = reply.header.add_checkpoint_workers();
        e->set_rank(r);
        auto f = round_.files.find(r);
        if (f != round_.files.end()) {
          e->set_kind(CheckpointWorker::TRAINING);
          *e->mutable_file() = f->second;
        } else if (workers_[r].finished) {
          *e = workers_[r].finished_entry;
          e->set_rank(r);
          e->set_kind(CheckpointWorker::FINISHED);
          e->set_samples(workers_[r].samples);
        } else if (auto last = last_state_.find(r); last != last_state_.end()) {
          e->set_kind(CheckpointWorker::LEFT);
          *e->mutable_file() = last->second.second;
          e->set_from_dir(last->second.first);
        } else {
          e->set_kind(CheckpointWorker::GONE);
        }
      }
    }
    Reply(peer.first, &reply, rank);
  }
  if (st.ok() && shard_ == 0) {
    // Ranks here now have their state in this checkpoint; worker 0 copies
    // those that left into it too, so it holds every rank's place.
    for (auto& [r, last] : last_state_) last.first = round_.dir;
    for (const auto& [r, f] : round_.files) last_state_[r] = {round_.dir, f};
  }
  last_checkpoint_clock_ = std::max(last_checkpoint_clock_, round_.clock);
  if (due_checkpoint_clock_ >= 0 && due_checkpoint_clock_ <= round_.clock) due_checkpoint_clock_ = -1;
  round_ = CheckpointRound();
  // The write held the event loop: nobody was silent meanwhile.
  for (WorkerState& w : workers_) w.last_seen = SteadyClock::now();
}

void ServerShard::AbandonCheckpoint(const std::string& why) {
  LOG(WARNING) << log_prefix_ << "checkpoint at clock " << round_.clock << " abandoned: " << why << "; "
               << round_.dir << " stays incomplete (no MANIFEST, never resumed from); training goes on";
  for (const auto& [rank, peer] : round_.waiting) {
    Message reply;
    reply.header.set_type(CHECKPOINT_REPLY);
    reply.header.set_request_id(peer.second);
    reply.header.set_checkpoint_clock(round_.clock);
    reply.header.set_checkpoint_abandoned(true);
    reply.header.set_error("checkpoint at clock " + std::to_string(round_.clock) + " abandoned: " + why);
    Reply(peer.first, &reply, rank);
  }
  if (due_checkpoint_clock_ >= 0 && due_checkpoint_clock_ <= round_.clock) due_checkpoint_clock_ = -1;
  round_ = CheckpointRound();
}

Status ServerShard::WriteChunkStateIfDealing(CheckpointFile* written) {
  ChunkCoordinatorState state;
  if (shard_ != 0 || !chunks_.SaveState(round_.clock, &state)) return Status::OK();
  TETHER_RETURN_IF_ERROR(WriteChunkState(FileSystem::Default(), round_.dir, state, written));
  if (state.completed_epochs() >= state.epochs()) {
    LOG(INFO) << log_prefix_ << "checkpoint at clock " << round_.clock << ": data on demand, all "
              << state.epochs() << " epochs' chunks completed: " << round_.dir << "/" << kChunkStateName;
    return Status::OK();
  }
  LOG(INFO) << log_prefix_ << "checkpoint at clock " << round_.clock << ": data on demand at epoch "
            << state.completed_epochs() + 1 << " of " << state.epochs() << ", "
            << (state.open_size() > 0 ? state.open(0).completed_size() : 0) << " chunk(s) of it completed, "
            << (state.open_size() > 0 ? state.open(0).held_size() : 0)
            << " dealt and not completed (dealt again on a resume): " << round_.dir << "/" << kChunkStateName;
  return Status::OK();
}

std::string ServerShard::ResumeChunkState(const std::string& dir, const CheckpointManifest& m) {
  if (shard_ != 0) return "";
  StatusOr<std::optional<ChunkCoordinatorState>> state = ReadChunkState(dir, m);
  if (!state.ok()) {
    fatal_ = state.status();
    return "cannot resume: " + state.status().message();
  }
  if (!state->has_value()) return "";
  if (Status st = chunks_.Resume(std::move(**state)); !st.ok()) return "cannot resume: " + st.message();
  return "";
}

void ServerShard::AdmitWaitingHellos() {
  auto waiting = std::move(waiting_hellos_);
  waiting_hellos_.clear();
  for (auto& [rank, hello] : waiting) Handle(hello.identity, &hello.request);
}

bool ServerShard::ResolveKeyList(const std::string& identity, const Message& m, KeyListCache::List* offsets) {
  const MessageHeader& h = m.header;
  if (h.key_list() == 0) return true;
  ServerTable& t = *tables_[h.table_id()];  // CheckRequest: a known table
  const bool omitted = m.keys.size() == 0;  // CheckRequest: a dense table has num_keys 0
  const uint64_t n = h.num_keys();
  if (!IsRowTable(t.spec()) || n == 0) return true;
  if (h.absent_as_zeros()) {
    if (!omitted) return true;  // served as a plain absent-as-zeros pull
    ++stats_.bad_messages;
    ReplyError(identity, h, "PULL from worker " + std::to_string(h.sender_rank()) +
                                ": an absent_as_zeros pull must carry its keys, not name key list " +
                                std::to_string(h.key_list()));
    return false;
  }
  auto lists = key_lists_.find(h.sender_rank());  // CheckPeer: the rank said HELLO
  if (!omitted) {
    // Define: kept when it fits; otherwise served as a plain request (the
    // worker's mirror, of the same capacity, does not keep it either).
    if (lists == key_lists_.end() || KeyListCache::Charge(n) > lists->second.capacity_bytes()) return true;
    auto list = std::make_shared<std::vector<uint64_t>>();
    const Status st = t.ResolveRows(m.KeyData(&key_scratch_), n, list.get());
    if (!st.ok()) {
      ++stats_.bad_messages;
      LOG(ERROR) << log_prefix_ << TypeName(h.type()) << " from worker " << h.sender_rank() << ": " << st.message();
      ReplyError(identity, h, TypeName(h.type()) + " from worker " + std::to_string(h.sender_rank()) + ": " +
                                  st.message());
      return false;
    }
    (void)lists->second.Put(h.table_id(), h.key_list(), list);
    ++key_list_stats_.defined;
    *offsets = std::move(list);
    return true;
  }
  KeyListCache::List list = lists == key_lists_.end() ? nullptr : lists->second.Find(h.table_id(), h.key_list());
  if (list != nullptr && list->size() == n) {
    DCHECK(t.ValidOffsets(list->data(), n));  // rows never move (server/table.h)
    ++key_list_stats_.used;
    key_list_stats_.bytes_saved += n * sizeof(uint64_t);
    *offsets = std::move(list);
    return true;
  }
  // Not kept here (evicted, this shard restarted, or its define failed):
  // the worker sends the request again with its keys. No bad message.
  ++key_list_stats_.unknown;
  VLOG(1) << log_prefix_ << "worker " << h.sender_rank() << " named key list " << h.key_list() << " of table "
          << t.spec().name() << " (" << n << " keys), which this shard does not hold";
  Message reply;
  reply.header.set_type(ERROR_REPLY);
  reply.header.set_request_id(h.request_id());
  reply.header.set_table_id(h.table_id());
  reply.header.set_key_list_unknown(true);
  reply.header.set_error(log_prefix_ + TypeName(h.type()) + " names key list " + std::to_string(h.key_list()) +
                         " of table " + t.spec().name() + " (" + std::to_string(n) + " keys), which server " +
                         std::to_string(shard_) + " does not hold; send the keys");
  Reply(identity, &reply, h.sender_rank());
  return false;
}

void ServerShard::ServePull(const std::string& identity, const Message& m, const std::vector<uint64_t>* offsets) {
  const MessageHeader& h = m.header;
  ServerTable& t = *tables_[h.table_id()];
  Message reply;
  reply.header.set_type(PULL_REPLY);
  reply.header.set_request_id(h.request_id());
  reply.header.set_table_id(h.table_id());
  reply.header.set_min_clock(clocks_.min_clock());
  reply.header.set_version(t.version());
  const int64_t s = t.staleness();
  if (s >= 0 && clocks_.min_clock() < h.clock() - s) ++stats_.bound_violations;  // invariant check
  const Status filled = IsRowTable(t.spec()) && h.absent_as_zeros()
                            ? FillValuesIfPresent(t, m.KeyData(&key_scratch_), h.num_keys(), &reply)
                            : FillValues(t, IsDenseTable(t.spec()) || offsets != nullptr ? nullptr : m.KeyData(&key_scratch_),
                                         h.num_keys(), &reply, offsets);
  if (!filled.ok()) {
    ++stats_.bad_messages;
    LOG(ERROR) << log_prefix_ << "PULL from worker " << h.sender_rank() << ": " << filled.message();
    ReplyError(identity, h, "PULL from worker " + std::to_string(h.sender_rank()) + ": " + filled.message());
    return;
  }
  if (IsRowTable(t.spec())) stats_.rows_pulled += h.num_keys();
  Reply(identity, &reply, h.sender_rank());
}

Status ServerShard::FillValues(ServerTable& t, const uint64_t* keys, uint64_t n, Message* reply,
                               const std::vector<uint64_t>* offsets) {
  if (IsDenseTable(t.spec())) {
    const uint64_t size = t.dense_end() - t.dense_begin();
    reply->values = reply_pool_.Take(size * sizeof(float));
    t.PullDense(static_cast<float*>(reply->values.data()));
    reply->header.set_num_values(size);
    return Status::OK();
  }
  const uint32_t dim = t.spec().dim();
  reply->values = reply_pool_.Take(n * dim * sizeof(float));
  if (offsets != nullptr) {
    t.PullRowsAt(offsets->data(), n, static_cast<float*>(reply->values.data()));
  } else {
    TETHER_RETURN_IF_ERROR(t.PullRows(keys, n, static_cast<float*>(reply->values.data())));
  }
  reply->header.set_value_dim(dim);
  reply->header.set_num_values(n * dim);
  return Status::OK();
}

Status ServerShard::FillValuesIfPresent(const ServerTable& t, const uint64_t* keys, uint64_t n, Message* reply) {
  const uint32_t dim = t.spec().dim();
  reply->values = reply_pool_.Take(n * dim * sizeof(float));
  t.PullRowsIfPresent(keys, n, static_cast<float*>(reply->values.data()));
  reply->header.set_value_dim(dim);
  reply->header.set_num_values(n * dim);
  return Status::OK();
}

void ServerShard::ServeReadyPulls() {
  // AVERAGE: rounds every counted worker ended are merged before any pull
  // of the next round is answered.
  MergeAverageRounds();
  // Pulls wait in arrival order; serve every one the new min_clock admits.
  for (auto it = pending_.begin(); it != pending_.end();) {
    const MessageHeader& rh = it->request.header;
    if (clocks_.PullReady(rh.clock(), tables_[rh.table_id()]->staleness())) {
      // Pulls of one minibatch wait side by side: charge the worker only for
      // the longest wait since its last release, not for each table.
      WorkerState& w = workers_[rh.sender_rank()];
      const auto now = std::chrono::steady_clock::now();
      const auto from = std::max(it->since, w.wait_counted_until);
      if (now > from) w.bound_wait_s += std::chrono::duration<double>(now - from).count();
      w.wait_counted_until = now;
      ServePull(it->identity, it->request, it->offsets.get());
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
}

bool ServerShard::EvalExcused(int rank) const {
  // Joiners hold no part of the test set (it is split over the initial
  // ranks): they owe no partial, and one they send is merged all the same.
  if (rank >= initial_workers_ || rank >= static_cast<int>(workers_.size())) return true;
  const WorkerState& w = workers_[rank];
  return w.said_bye || w.dead;
}

bool ServerShard::Member(size_t rank) const {
  return rank < static_cast<size_t>(initial_workers_) || (rank < workers_.size() && workers_[rank].said_hello);
}

void ServerShard::HandleEvalGather(const std::string& identity, const Message& m) {
  const MessageHeader& h = m.header;
  const int rank = h.sender_rank();
  const std::string who = "worker " + std::to_string(rank);
  if (shard_ != 0) {
    ++stats_.bad_messages;
    ReplyError(identity, h, "EVAL_GATHER from " + who + " sent to shard " + std::to_string(shard_) +
                                "; evaluation partials are gathered by shard 0");
    return;
  }
  std::vector<EvalPartial> mine;
  if (Status st = UnpackEvalPartials(m, who, &mine); !st.ok()) {
    ++stats_.bad_messages;
    ReplyError(identity, h, st.message());
    return;
  }
  for (const EvalPartial& p : mine) {
    if (p.rank() != rank) {
      ++stats_.bad_messages;
      ReplyError(identity, h, "EVAL_GATHER from " + who + " carries the partial of rank " + std::to_string(p.rank()));
      return;
    }
    (void)eval_book_.Put(h.eval_round(), p);  // rank checked above (CheckRequest)
  }
  const auto excused = [this](int r) { return EvalExcused(r); };
  Message reply;
  reply.header.set_type(EVAL_GATHER_REPLY);
  reply.header.set_request_id(h.request_id());
  reply.header.set_eval_round(h.eval_round());
  switch (h.eval_want()) {
    case MessageHeader::EVAL_WAIT:
      eval_book_.Park(h.eval_round(), {identity, h.request_id(), rank});
      AnswerEvalWaiters();
      return;
    case MessageHeader::EVAL_POLL: {
      std::vector<EvalPartial> all;
      const bool complete = eval_book_.TakeComplete(h.eval_round(), excused, &all);
      reply.header.set_eval_complete(complete);
      if (complete) {
        if (Status st = PackEvalPartials(all, &reply); !st.ok()) {
          ReplyError(identity, h, st.message());
          return;
        }
      }
      break;
    }
    default:
      reply.header.set_eval_complete(eval_book_.Complete(h.eval_round(), excused));
      break;
  }
  Reply(identity, &reply, rank);
}

void ServerShard::AnswerEvalWaiters() {
  if (shard_ != 0) return;
  const auto excused = [this](int r) { return EvalExcused(r); };
  for (const int64_t round : eval_book_.WaitingRounds()) {
    std::vector<EvalPartial> all;
    if (!eval_book_.TakeComplete(round, excused, &all)) continue;
    for (const EvalBook::Waiter& w : eval_book_.TakeWaiters(round)) {
      const WorkerState& ws = workers_[w.rank];
      if (ws.said_bye || ws.dead) continue;  // left meanwhile: nobody to answer
      Message reply;
      reply.header.set_type(EVAL_GATHER_REPLY);
      reply.header.set_request_id(w.request_id);
      reply.header.set_eval_round(round);
      reply.header.set_eval_complete(true);
      MessageHeader req;
      req.set_request_id(w.request_id);
      req.set_sender_rank(w.rank);
      if (Status st = PackEvalPartials(all, &reply); !st.ok()) {
        ReplyError(w.identity, req, st.message());
        continue;
      }
      Reply(w.identity, &reply, w.rank);
    }
  }
}

void ServerShard::MaybeReleaseBarrier() {
  // The job's end: every worker that joined and did not leave is here (a
  // joiner's slot never taken holds nobody back).
  uint64_t total = 0;
  int evaluator = -1;  // the lowest rank here: it evaluates and reports
  for (size_t r = 0; r < workers_.size(); ++r) {
    const WorkerState& w = workers_[r];
    if (!Member(r)) continue;
    if (!w.at_barrier && !w.said_bye && !w.dead) return;
    total += w.samples;
    if (evaluator < 0 && w.at_barrier && !w.said_bye && !w.dead) evaluator = static_cast<int>(r);
  }
  if (evaluator < 0) return;  // nobody is waiting
  // Once the job's evaluator is chosen, it stays: a late joiner at a later
  // release must not evaluate (and overwrite the metrics of) a finished job.
  if (job_evaluator_ < 0) job_evaluator_ = evaluator;
  evaluator = job_evaluator_;
  int64_t latest = 0;
  for (int r = 0; r < clocks_.num_workers(); ++r) latest = std::max(latest, clocks_.clock(r));
  for (size_t r = 0; r < workers_.size(); ++r) {
    WorkerState& w = workers_[r];
    if (!w.at_barrier || w.said_bye || w.dead) continue;
    Message reply;
    reply.header.set_type(BARRIER_REPLY);
    reply.header.set_request_id(w.barrier_request);
    reply.header.set_samples(total);
    reply.header.set_clock(latest);  // the largest clock any worker reached
    reply.header.set_evaluator_rank(evaluator);
    Reply(w.identity, &reply, static_cast<int>(r));
    w.at_barrier = false;
  }
}

}  // namespace tether

namespace tether {

void StalenessHistogram::Add(uint64_t tau) {
  ++count[std::min<uint64_t>(tau, kBuckets - 1)];
  ++pushes;
  sum += tau;
  max = std::max(max, tau);
}

Status ServerShard::ReportAdaptiveBatch(int rank, const AdaptiveBatchClock& report, MessageHeader* reply) {
  AdaptiveBatchClock settings = report;
  settings.clear_rows();
  settings.clear_batch_size();
  if (batch_controller_ == nullptr) {
    BatchControllerOptions o;
    o.minibatch_size = settings.minibatch_size();
    o.b_min = settings.config().b_min();
    o.b_max = settings.config().b_max();
    o.warmup_clocks = settings.config().warmup_clocks();
    o.window_clocks = settings.config().window_clocks();
    o.smoothing = settings.config().smoothing();
    if (Status st = CheckBatchControllerOptions(o); !st.ok())
      return Status::InvalidArgument("CLOCK from worker " + std::to_string(rank) +
                                     ": train.adaptive_batch refused: " + st.message());
    batch_controller_ = std::make_unique<BatchController>(o);
    adaptive_settings_ = settings;
    LOG(INFO) << log_prefix_ << "adaptive batch sizes in [" << o.b_min << ", " << o.b_max << "], mean "
              << o.minibatch_size << ", after " << o.warmup_clocks << " warm-up clocks (from worker " << rank << ")";
  } else if (settings.SerializeAsString() != adaptive_settings_.SerializeAsString()) {
    return Status::InvalidArgument("CLOCK from worker " + std::to_string(rank) +
                                   ": train.adaptive_batch differs from the job's (first reported): worker " +
                                   std::to_string(rank) + " has {" + settings.ShortDebugString() + "}, the job {" +
                                   adaptive_settings_.ShortDebugString() + "}");
  }
  const auto now = std::chrono::steady_clock::now();
  const double bound_wait = workers_[rank].bound_wait_s;
  double busy = 0;
  auto [it, first] = batch_timing_.try_emplace(rank);
  if (!first) {
    busy = std::chrono::duration<double>(now - it->second.last_clock).count() - (bound_wait - it->second.bound_wait_s);
    busy = std::max(0.0, busy);
  }
  it->second.last_clock = now;
  it->second.bound_wait_s = bound_wait;
  const int before = batch_controller_->batch(rank);
  const int b = batch_controller_->Report(rank, report.rows(), busy);
  if (b != before)
    VLOG(1) << log_prefix_ << "worker " << rank << " batch " << before << " -> " << b << " ("
            << batch_controller_->rate(rank) << " rows/s)";
  reply->set_batch_size(b);
  return Status::OK();
}

void ServerShard::ForgetAdaptiveBatch(int rank) {
  batch_timing_.erase(rank);
  if (batch_controller_ != nullptr) batch_controller_->Remove(rank);
}

void ServerShard::AddDelta(const std::string& identity, const Message& m) {
  const MessageHeader& h = m.header;
  const ServerTable& t = *tables_[h.table_id()];
  Status st;
  if (averager_ == nullptr) {
    st = Status::FailedPrecondition("table " + t.spec().name() +
                                    " is not trained with consistency.model AVERAGE: model deltas are refused");
  } else if (IsDenseTable(t.spec())) {
    st = averager_->AddDense(h.sender_rank(), h.clock(), h.table_id(), m.ValueData(&value_scratch_), h.num_values());
  } else {
    st = averager_->AddRows(h.sender_rank(), h.clock(), h.table_id(), m.KeyData(&key_scratch_), h.num_keys(),
                            t.spec().dim(), m.ValueData(&value_scratch_));
  }
  if (!st.ok()) {
    ++stats_.bad_messages;
    LOG(ERROR) << log_prefix_ << "PUSH_DELTA from worker " << h.sender_rank() << ": " << st.message();
    ReplyError(identity, h, "PUSH_DELTA from worker " + std::to_string(h.sender_rank()) + ": " + st.message());
    return;
  }
  ++stats_.pushes;
  if (!IsDenseTable(t.spec())) stats_.rows_pushed += h.num_keys();
  Message reply;
  reply.header.set_type(PUSH_DELTA_REPLY);
  reply.header.set_request_id(h.request_id());
  reply.header.set_table_id(h.table_id());
  reply.header.set_min_clock(clocks_.min_clock());
  Reply(identity, &reply, h.sender_rank());
}

void ServerShard::MergeAverageRounds() {
  if (averager_ == nullptr) return;
  const auto rows = [this](uint32_t table, const uint64_t* keys, uint64_t n, uint32_t, const float* step) {
    stats_.updates_applied += n;
    return tables_[table]->PushRows(keys, n, step);
  };
  const auto dense = [this](uint32_t table, const float* step, uint64_t) {
    ++stats_.updates_applied;
    return tables_[table]->PushDense(step);
  };
  StatusOr<int64_t> merged = averager_->MergeThrough(clocks_.min_clock(), rows, dense);
  if (!merged.ok()) {
    // A merged step that is not finite (SUM refuses it, C22): the job
    // cannot go on with a model that lost a round.
    fatal_ = Status::FailedPrecondition(log_prefix_ + "merging a round of model deltas: " + merged.status().message());
    LOG(ERROR) << fatal_.message();
    return;
  }
  if (*merged > 0)
    VLOG(1) << log_prefix_ << "merged " << *merged << " round(s); " << averager_->rounds_merged() << " so far";
}

void ServerShard::DropAverageDeltas(int rank, const char* why) {
  if (averager_ == nullptr) return;
  const uint64_t dropped = averager_->Drop(rank);
  if (dropped > 0)
    LOG(WARNING) << log_prefix_ << "worker " << rank << " " << why << " before ending its round: " << dropped
                 << " row(s) of its model delta discarded";
}

void ServerShard::ApplyPush(const std::string& identity, const Message& m, const std::vector<uint64_t>* offsets) {
  const MessageHeader& h = m.header;
  ++stats_.pushes;
  ServerTable& t = *tables_[h.table_id()];
  // τ: updates to this table applied since the version the gradient was
  // computed from (a version from the future means a confused peer: τ = 0).
  const uint64_t tau = h.version() <= t.version() ? t.version() - h.version() : 0;
  stats_.staleness.Add(tau);
  float lr_scale = 1.0f;
  switch (t.spec().consistency().staleness_policy()) {
    case INVERSE: lr_scale = 1.0f / static_cast<float>(std::max<uint64_t>(1, tau)); break;
    case INVERSE_PLUS_ONE: lr_scale = 1.0f / static_cast<float>(tau + 1); break;
    default: break;
  }
  // Adaptive batch sizes, step_scaling SERVER_WEIGHT: the push's batch size
  // over the job's mean (CheckPeer refused a weight that is not finite > 0).
  if (h.has_push_weight()) lr_scale *= h.push_weight();
  const float* g = m.ValueData(&value_scratch_);
  const uint64_t* keys = nullptr;
  Status st;
  if (IsDenseTable(t.spec())) {
    st = t.PushDense(g, lr_scale);
  } else if (offsets != nullptr) {
    // A key list's rows: no lookups (keys, when sent, only name a row in an error).
    if (m.keys.size() != 0) keys = m.KeyData(&key_scratch_);
    st = t.PushRowsAt(offsets->data(), h.num_keys(), g, lr_scale, keys);
  } else {
    keys = m.KeyData(&key_scratch_);
    st = t.PushRows(keys, h.num_keys(), g, lr_scale);
  }
  if (!st.ok()) {
    ++stats_.bad_messages;  // nothing applied: the worker counts it as lost
    // A step that made a NaN is the server's optimizer's doing (C22), not
    // the worker's: its gradients were finite (CheckPeer refuses others).
    const std::string what = st.code() == Status::Code::kFailedPrecondition
                                 ? st.message() + " (the gradients pushed by worker " +
                                       std::to_string(h.sender_rank()) + " were finite)"
                                 : "PUSH from worker " + std::to_string(h.sender_rank()) + ": " + st.message();
    LOG(ERROR) << log_prefix_ << what;
    ReplyError(identity, h, what);
    return;
  }
  if (!IsDenseTable(t.spec())) stats_.rows_pushed += h.num_keys();
  stats_.updates_applied += IsDenseTable(t.spec()) ? 1 : h.num_keys();
  Message reply;
  reply.header.set_type(PUSH_REPLY);
  reply.header.set_request_id(h.request_id());
  reply.header.set_table_id(h.table_id());
  reply.header.set_version(t.version());
  reply.header.set_min_clock(clocks_.min_clock());
  if (h.want_values()) {
    // The rows as they are now, own update included: the worker's cache
    // takes them instead of pulling again (read-my-writes).
    (void)FillValues(t, keys, h.num_keys(), &reply, offsets);  // the push just created every row: cannot fail
  }
  Reply(identity, &reply, h.sender_rank());
}

Status ServerShard::CheckWorkerTimeouts() {
  const auto now = SteadyClock::now();
  const int64_t timeout_ms = config_.cluster().worker_timeout_ms();
  for (size_t r = 0; r < workers_.size(); ++r) {
    WorkerState& w = workers_[r];
    if (!w.said_hello || w.said_bye || w.dead || w.at_barrier) continue;
    const int64_t silent_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - w.last_seen).count();
    if (silent_ms <= timeout_ms) continue;
    const int rank = static_cast<int>(r);
    if (config_.cluster().on_worker_timeout() == FAIL_JOB)
      return Status::Unavailable(log_prefix_ + "worker " + std::to_string(rank) + " silent for " +
                                 std::to_string(silent_ms) + " ms at clock " + std::to_string(clocks_.clock(rank)) +
                                 " (cluster.worker_timeout_ms=" + std::to_string(timeout_ms) +
                                 ", on_worker_timeout: FAIL_JOB)");
    w.dead = true;
    w.removed_why = "removed: silent for " + std::to_string(silent_ms) + " ms at clock " +
                    std::to_string(clocks_.clock(rank)) + " (cluster.worker_timeout_ms=" + std::to_string(timeout_ms) +
                    ")";
    ++stats_.workers_timed_out;
    // Told now, unasked: a worker that was stopped (SIGSTOP, a swapped-out
    // host) reads it when it wakes, before it finds this shard gone. A dead
    // one's connection is closed: nobody to tell.
    if (!w.identity.empty() && ConnectionLive(w.identity)) {
      Message removed;
      removed.header.set_type(REMOVED);
      removed.header.set_error(log_prefix_ + "worker " + std::to_string(rank) + " " + w.removed_why);
      Reply(w.identity, &removed, rank);
    }
    DropAverageDeltas(rank, "timed out");
    int64_t others = clocks_.MinClockExcluding(rank);
    LOG(WARNING) << log_prefix_ << "worker " << rank << " silent for " << silent_ms << " ms: removed from the min clock at its clock "
                 << clocks_.clock(rank) << " (slowest other worker at "
                 << (others == ClockTracker::kNoWorkers ? std::string("none") : std::to_string(others)) << ")";
    if (clocks_.Remove(rank)) ServeReadyPulls();
    ForgetAdaptiveBatch(rank);
    chunks_.Leave(rank);
    MaybeWriteCheckpoint();
    MaybeReleaseBarrier();
    AnswerEvalWaiters();
  }
  return Status::OK();
}

void ServerShard::HandleChunkNext(const std::string& identity, const Message& m) {
  const MessageHeader& h = m.header;
  const int rank = h.sender_rank();
  if (shard_ != 0) {
    ++stats_.bad_messages;
    ReplyError(identity, h, "CHUNK_NEXT from worker " + std::to_string(rank) + " sent to shard " +
                                std::to_string(shard_) + ": shard 0 deals the chunks of data on demand");
    return;
  }
  // A waiting worker catches up to the fastest counting worker with empty
  // clocks (DataOnDemandChunk.max_clock), never past it.
  int64_t max_clock = 0;
  for (int r = 0; r < clocks_.num_workers(); ++r)
    if (clocks_.Counts(r)) max_clock = std::max(max_clock, clocks_.clock(r));
  StatusOr<DataOnDemandChunk> out = chunks_.Next(rank, h.chunk(), max_clock);
  if (!out.ok()) {
    ++stats_.bad_messages;
    LOG(ERROR) << log_prefix_ << out.status().message();
    ReplyError(identity, h, out.status().message());
    return;
  }
  Message reply;
  reply.header.set_type(CHUNK_REPLY);
  reply.header.set_request_id(h.request_id());
  *reply.header.mutable_chunk() = std::move(out).value();
  Reply(identity, &reply, rank);
}

ShardStats ServerShard::SnapshotStats() const {
  ShardStats s;
  s.set_shard(shard_);
#define TETHER_COPY_COUNTER(name) s.set_##name(stats_.name);
  TETHER_SERVER_COUNTERS(TETHER_COPY_COUNTER)
#undef TETHER_COPY_COUNTER
  int last = StalenessHistogram::kBuckets - 1;
  while (last > 0 && stats_.staleness.count[last] == 0) --last;
  s.mutable_staleness_histogram()->Add(stats_.staleness.count, stats_.staleness.count + last + 1);
  s.set_staleness_sum(stats_.staleness.sum);
  s.set_staleness_max(stats_.staleness.max);
  // One entry per rank up to the highest that took part (joiners included;
  // a slot skipped over has zeros and an empty WorkerStats).
  size_t ranks = std::min(workers_.size(), static_cast<size_t>(initial_workers_));
  for (size_t r = ranks; r < workers_.size(); ++r)
    if (workers_[r].said_hello) ranks = r + 1;
  for (size_t r = 0; r < ranks; ++r) {
    s.add_bound_wait_seconds(workers_[r].bound_wait_s);
    *s.add_workers() = workers_[r].stats;
  }
  for (const auto& t : tables_) s.add_table_rows(IsRowTable(t->spec()) ? t->num_rows() : 0);
  chunks_.FillStats(&s);
  ShardKeyListStats* kl = s.mutable_key_lists();
  kl->set_defined(key_list_stats_.defined);
  kl->set_used(key_list_stats_.used);
  kl->set_unknown(key_list_stats_.unknown);
  kl->set_bytes_saved(key_list_stats_.bytes_saved);
  if (averager_ != nullptr) {
    ShardAverageStats* av = s.mutable_average();
    av->set_rounds_merged(static_cast<uint64_t>(averager_->rounds_merged()));
    av->set_deltas_merged(averager_->deltas_merged());
    av->set_deltas_discarded(averager_->deltas_discarded());
    av->set_rows_discarded(averager_->deltas_dropped());
  }
  return s;
}

}  // namespace tether
