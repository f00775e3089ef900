#include "server/replica_host.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include <glog/logging.h>

#include "core/net/curve.h"
#include "core/net/rendezvous.h"
#include "core/net/transport.h"
#include "core/wire_limits.h"
#include "server/shard_input.h"
#include "server/shard_state.h"

namespace tether {
namespace {

int64_t MsBetween(ReplicaHost::Clock::time_point a, ReplicaHost::Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}

}  // namespace

ReplicaHost::ReplicaHost(const JobConfig& config, int process) : ReplicaHost(config, process, 1) {}

ReplicaHost::ReplicaHost(const JobConfig& config, int process, int distance)
    : config_(config),
      process_(process),
      shard_((process + config.cluster().num_servers() - distance) % config.cluster().num_servers()),
      log_prefix_("[server " + std::to_string(process) + ", replica of shard " + std::to_string(shard_) + "] "),
      copy_(std::make_unique<ServerShard>(config, shard_, nullptr, "server " + std::to_string(process))),
      ctx_(1) {
  slot_ = process;
  copy_->BeginCopy();
}

ReplicaHost::ReplicaHost(const JobConfig& config, Join join)
    : config_(config), process_(-1), shard_(join.shard), join_(true), ctx_(1), join_endpoint_(join.endpoint) {
  slot_ = -1;
  member_.store(false);
  if (join.shard >= 0) {
    candidates_ = {join.shard};
  } else {
    for (int s = 0; s < config.cluster().num_servers(); ++s) candidates_.push_back(s);
  }
  shard_ = candidates_.front();
  log_prefix_ = "[joining replica of shard " + std::to_string(shard_) + "] ";
}

ReplicaHost::~ReplicaHost() {
  if (dealer_.handle() != nullptr) (void)zmq_socket_monitor(dealer_.handle(), nullptr, 0);
}

Status ReplicaHost::Start(const std::string& bind_endpoint, const std::string& advertise_host) {
  if (config_.security().has_curve()) {
    TETHER_ASSIGN_OR_RETURN(curve_, ServerPeerCurveClient(config_.security().curve()));
  }
  bind_endpoint_ = bind_endpoint;
  advertise_host_ = advertise_host;
  if (join_) return StartCandidate();
  TETHER_ASSIGN_OR_RETURN(primary_endpoint_, FindPrimary());
  TETHER_RETURN_IF_ERROR(copy_->Bind(bind_endpoint));
  advertised_ = AdvertisedEndpoint(copy_->endpoint(), advertise_host);
  return Connect();
}

StatusOr<std::string> ReplicaHost::FindPrimary(int wait_ms) {
  const ClusterConfig& c = config_.cluster();
  if (!join_endpoint_.empty()) return join_endpoint_;
  // A joining process asks the rendezvous first: a shard that failed over
  // is published there at its new primary.
  if (c.server_addresses_size() > shard_ && !(join_ && !c.rendezvous().empty())) return c.server_addresses(shard_);
  if (c.rendezvous().empty())
    return Status::InvalidArgument(log_prefix_ + "cluster.replicas=" + std::to_string(c.replicas()) +
                                   " needs where the other servers are (cluster.server_addresses or "
                                   "cluster.rendezvous): this process must reach shard " + std::to_string(shard_) +
                                   "'s primary");
  SocketOptions store;
  if (c.rendezvous().rfind("tcp://", 0) == 0) store.curve = curve_;  // a CURVE job's store is CURVE too
  TETHER_ASSIGN_OR_RETURN(auto rdzv, Rendezvous::Open(c.rendezvous(), store));
  // This shard's entry alone: a process started with another
  // cluster.num_servers learns it from the primary's refusal, not by
  // waiting for shards the job does not have.
  return LookupServer(rdzv.get(), JobId(config_), c.generation(), shard_,
                      wait_ms < 0 ? c.startup_timeout_ms() : wait_ms, [this] { return stop_.load(); });
}

void ReplicaHost::PublishClaim() {
  // Workers that never reached the dead primary read the shard's entry
  // again while they wait (core/net/server_lookup.h) and find the copy.
  const ClusterConfig& c = config_.cluster();
  SocketOptions store;
  if (c.rendezvous().rfind("tcp://", 0) == 0) store.curve = curve_;
  auto rdzv = Rendezvous::Open(c.rendezvous(), store);
  // The entry names the primary this copy claimed the shard from: replaced
  // even when that process answers (one stopped and continued steps down).
  Status st = rdzv.ok() ? PublishServer(rdzv->get(), JobId(config_), c.generation(), shard_, advertised_, 3000, "",
                                        primary_endpoint_)
                        : rdzv.status();
  if (st.ok())
    LOG(INFO) << log_prefix_ << "published " << advertised_ << " as shard " << shard_ << " in rendezvous "
              << c.rendezvous();
  else
    LOG(WARNING) << log_prefix_ << "could not publish the claimed shard in rendezvous " << c.rendezvous() << ": "
                 << st.message();
}

Status ReplicaHost::Connect() {
  SocketOptions o;
  o.send_hwm = config_.cluster().send_hwm();
  o.recv_hwm = config_.cluster().recv_hwm();
  o.send_timeout_ms = config_.cluster().request_timeout_ms();
  if (const int liveness = config_.cluster().liveness_timeout_ms(); liveness > 0) {
    o.heartbeat_ivl_ms = std::max(25, liveness / 4);
    o.heartbeat_timeout_ms = std::max(50, liveness);
  }
  // An entry is one message the primary took in: its frames and a header.
  o.max_frame_bytes = static_cast<int64_t>(2 * (kMaxFrameBytes + kMaxHeaderBytes));
  // One identity (and monitor endpoint) per connection: a joining process
  // that asks elsewhere must not meet its earlier connection's.
  const std::string identity = (join_ ? std::string("join") : "replica-" + std::to_string(process_)) + "-" +
                               std::to_string(shard_) + "-" + std::to_string(copy_->incarnation()) + "-" +
                               std::to_string(connections_++);
  o.monitor_endpoint = "inproc://tether-replica-monitor-" + identity;
  o.curve = curve_;
  if (curve_.enabled())
    o.monitor_events |=
        ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
  try {
    monitor_ = zmq::socket_t(ctx_, zmq::socket_type::pair);
    monitor_.set(zmq::sockopt::linger, 0);
    monitor_.connect(o.monitor_endpoint);
  } catch (const zmq::error_t& e) {
    return Status::IOError(log_prefix_ + "cannot watch the connection to the primary: " + e.what());
  }
  TETHER_ASSIGN_OR_RETURN(dealer_, ConnectDealer(ctx_, primary_endpoint_, identity, o));
  started_ = last_ack_ = last_turn_ = last_heard_ = Clock::now();
  return SayHello();
}

Status ReplicaHost::SayHello() {
  Message hello;
  hello.header.set_type(REPLICA_HELLO);
  ReplicaHelloBody* b = hello.header.mutable_replica_hello();
  b->set_shard(shard_);
  b->set_endpoint(advertised_);
  b->set_incarnation(copy_->incarnation());
  b->set_process(process_);
  b->set_applied(0);
  b->set_num_servers(config_.cluster().num_servers());
  b->set_replicas(config_.cluster().replicas());
  b->set_consistency_model(config_.consistency().model());
  b->set_staleness(config_.consistency().staleness());
  if (join_) {
    b->set_join(true);
    b->set_state_format(kShardStateFormatVersion);
  }
  return SendMessage(dealer_, &hello, nullptr, "shard " + std::to_string(shard_) + "'s primary at " + primary_endpoint_);
}

Status ReplicaHost::Run() {
  const Status st = Follow();
  if (claimed_.load()) return st;
  // The copy will never serve: workers that came to its port (their
  // primary gone) lose the connection now and name the lost shard, rather
  // than waiting on a port nobody reads.
  copy_->CloseSocket();
  if (!st.ok()) LOG(ERROR) << st.message();
  // Left out of a claim: its tables go before the caller copies the shard
  // again from the claimant.
  if (!rejoin_.empty()) copy_.reset();
  return st;
}

Status ReplicaHost::Follow() {
  if (!join_)
    LOG(INFO) << log_prefix_ << "holds a copy of shard " << shard_ << " (primary at " << primary_endpoint_
              << "); serves it at " << advertised_ << " if the primary goes";
  while (!stop_.load()) {
    // Made each turn: a joining process asks another shard on new sockets.
    zmq::pollitem_t items[] = {{dealer_.handle(), 0, ZMQ_POLLIN, 0}, {monitor_.handle(), 0, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(100));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      return Status::IOError(log_prefix_ + "poll: " + e.what());
    }
    const auto now = Clock::now();
    const bool stalled = OwnStall(now);
    Status result;
    if (DrainTurn(&result) == Step::kEnded) {
      if (refused_ && AskAgainLater(result, &result)) continue;
      if (refused_ && NextCandidate(result, &result)) continue;
      return result;
    }
    if (Status st = AskAgainIfDue(now); !st.ok()) return st;
    Ack(now);
    const Step seen = ReadMonitor();
    if (seen == Step::kKeyRefused)
      return Status::FailedPrecondition(log_prefix_ + "shard " + std::to_string(shard_) + "'s primary at " +
                                        primary_endpoint_ + " refused this process's CURVE key " + curve_.public_key +
                                        (zap_status_ != 0 ? " (ZAP status " + std::to_string(zap_status_) + ")"
                                                          : " (" + std::to_string(kKnownBadHandshakes) +
                                                                " handshakes failed in a row)") +
                                        ": the servers must share one key pair (security.curve."
                                        "server_secret_key_file and server_public_key_file)");
    if (seen == Step::kPrimaryGone && !member_.load() && (stalled || OwnStall(Clock::now()) || now < stalled_until_))
      return Status::Unavailable(log_prefix_ + "this process did not run for a while (stopped?) and lost its "
                                 "connection to shard " + std::to_string(shard_) + "'s primary at " +
                                 primary_endpoint_ + " before it caught up: it is not the shard's replica; start it "
                                 "again to join");
    if (seen == Step::kPrimaryGone && !member_.load())
      return Status::Unavailable(log_prefix_ + "shard " + std::to_string(shard_) + "'s primary at " +
                                 primary_endpoint_ + " went before this process caught up with it (" +
                                 (restored_ ? "state restored, " + std::to_string(applied_) + " entries applied"
                                            : std::to_string(state_.size()) + " bytes of its state received") +
                                 "): its copy cannot serve the shard");
    if (seen == Step::kPrimaryGone) {
      // Looked at again now: a stop may have come after this turn began.
      const bool stalled_since = OwnStall(Clock::now());
      if (stalled || stalled_since || now < stalled_until_)
        return Status::Unavailable(log_prefix_ + "lost the primary right after this process itself did not run for "
                                   "a while: its copy may lack what the primary committed since; it does not claim "
                                   "shard " + std::to_string(shard_));
      return ClaimOrFollow(now);
    }
    if (join_ && !connected_ && MsBetween(last_lookup_, now) >= kRelookupMs) {
      if (Status st = Relookup(); !st.ok()) return st;
    }
    if (join_ && !connected_ && !wait_noted_ && MsBetween(started_, now) >= kNoteWaitMs) {
      wait_noted_ = true;
      LOG(WARNING) << log_prefix_ << "shard " << shard_ << "'s primary at " << primary_endpoint_
                   << " has not answered for " << kNoteWaitMs / 1000 << " s; waiting for it up to "
                   << "cluster.startup_timeout_ms=" << config_.cluster().startup_timeout_ms()
                   << " ms in all (a job that already ended leaves nobody to answer: stop this process then)";
    }
    if (!connected_ && MsBetween(started_, now) > config_.cluster().startup_timeout_ms())
      return Status::DeadlineExceeded(
          log_prefix_ + "shard " + std::to_string(shard_) + "'s primary at " + primary_endpoint_ +
          " did not answer within cluster.startup_timeout_ms=" + std::to_string(config_.cluster().startup_timeout_ms()) +
          (join_ && config_.cluster().rendezvous().empty()
               ? " (a shard that failed over is served elsewhere: a joining process finds it through the job's "
                 "rendezvous, --rendezvous)"
               : ""));
  }
  return Status::OK();
}

bool ReplicaHost::OwnStall(Clock::time_point now) {
  const int liveness = config_.cluster().liveness_timeout_ms();
  const int64_t gap = MsBetween(last_turn_, now);
  last_turn_ = now;
  if (liveness <= 0 || gap <= liveness / 2) return false;
  LOG(WARNING) << log_prefix_ << "this process did not run for " << gap << " ms";
  stalled_until_ = now + std::chrono::milliseconds(liveness);
  return true;
}

void ReplicaHost::ForgiveOwnWork(const BusyWitness::Verdict& work) {
  const int liveness = config_.cluster().liveness_timeout_ms();
  // A witness that did not run either saw the process stopped or starved:
  // OwnStall judges that gap as any stall.
  if (liveness <= 0 || !work.RanThroughout(std::chrono::milliseconds(liveness / 2))) return;
  last_turn_ += work.busy;
}

ReplicaHost::Step ReplicaHost::DrainTurn(Status* result) {
  if (!join_ || restored_) return DrainPrimary(result);
  // Until its copy is restored, a joining process's turns take in the
  // state (seconds for a large table): work of its own, witnessed.
  BusyWitness witness;
  const Step step = DrainPrimary(result);
  ForgiveOwnWork(witness.Finish());
  return step;
}

ReplicaHost::Step ReplicaHost::DrainPrimary(Status* result) {
  // Everything queued is read and checked first, and acknowledged before it
  // is applied: an entry the copy holds is applied before the copy could
  // claim the shard, so the primary's replies wait for one round trip, not
  // for this copy's work.
  std::vector<ShardInput> batch;
  const Step step = ReadQueued(&batch, result);
  if (!result->ok()) return Step::kEnded;
  Ack(Clock::now());
  for (ShardInput& input : batch) {
    ++applied_;
    if (*result = copy_->Replay(input.identity, &input.message); !result->ok()) return Step::kEnded;
  }
  if (step == Step::kEnded)
    LOG(INFO) << log_prefix_ << "shard " << shard_ << " ended on its primary; " << applied_ << " entries applied here";
  return step;
}

ReplicaHost::Step ReplicaHost::ReadQueued(std::vector<ShardInput>* batch, Status* result) {
  *result = Status::OK();
  size_t state_parts = 0;
  while (batch->size() < kMaxEntriesPerTurn) {
    Message m;
    Status st = RecvMessage(dealer_, &m, nullptr);
    if (st.code() == Status::Code::kUnavailable) return Step::kGoOn;
    if (!st.ok()) {
      *result = Status::DataLoss(log_prefix_ + "from shard " + std::to_string(shard_) + "'s primary: " + st.message());
      return Step::kEnded;
    }
    last_heard_ = Clock::now();
    generation_ = std::max(generation_, m.header.shard_generation());
    switch (m.header.type()) {
      case REPLICATE:
        chain_.assign(m.header.chain_endpoints().begin(), m.header.chain_endpoints().end());
        if (*result = TakeEntry(&m, batch); !result->ok()) return Step::kEnded;
        break;
      case REPLICA_STATE:
        if (*result = TakeStatePart(m); !result->ok()) return Step::kEnded;
        // A large state arrives over several turns: the replies to the
        // primary's probes and the acknowledgements go on between them.
        if (restored_ || ++state_parts >= kStatePartsPerTurn) return Step::kGoOn;
        break;
      case SHUTDOWN:
        // The job failed: this copy ends with its reason, not as a shard
        // that finished.
        if (m.header.has_job_abort() && !m.header.job_abort().reason().empty())
          *result = Status::Unavailable(log_prefix_ + "shard " + std::to_string(shard_) +
                                        " ended on its primary, which failed: " + m.header.job_abort().reason());
        return Step::kEnded;
      case REPLICATE_ACK:
        if (m.header.replicate_ack().refused()) {
          refused_ = true;
          refusal_kind_ = m.header.replicate_ack().join_refusal();
          refusal_reason_ = m.header.replicate_ack().reason();
          *result = Status::FailedPrecondition(log_prefix_ + "refused by the primary: " +
                                               m.header.replicate_ack().reason());
          return Step::kEnded;
        }
        break;
      default:
        break;  // the primary's connection probes (HEARTBEAT)
    }
  }
  return Step::kGoOn;  // more may be queued: read on the next turn
}

Status ReplicaHost::TakeEntry(Message* m, std::vector<ShardInput>* batch) {
  const ReplicateBody& b = m->header.replicate();
  const std::string peer = "shard " + std::to_string(shard_) + "'s primary at " + primary_endpoint_;
  if (b.shard() != shard_)
    return Status::DataLoss(log_prefix_ + peer + " sent an entry of shard " + std::to_string(b.shard()));
  if (join_ && !restored_)
    return Status::DataLoss(log_prefix_ + peer + " sent entry " + std::to_string(b.seq()) +
                            " before the shard's whole state");
  if (b.member() && !member_.load()) {
    member_.store(true);
    LOG(INFO) << log_prefix_ << "caught up with shard " << shard_ << "'s primary at entry " << b.seq()
              << ": this process is the shard's replica now and serves it at " << advertised_
              << " if the primary goes";
  }
  if (b.seq() <= received_) return Status::OK();  // sent again after a reconnect
  if (b.seq() != received_ + 1)
    return Status::DataLoss(log_prefix_ + peer + " sent entry " + std::to_string(b.seq()) + " after " +
                            std::to_string(received_) + ": an entry is missing");
  if (b.payload_bytes() > m->keys.size() || m->keys.size() - b.payload_bytes() >= 8)
    return Status::DataLoss(log_prefix_ + peer + ": entry " + std::to_string(b.seq()) + " says payload_bytes=" +
                            std::to_string(b.payload_bytes()) + " in a keys frame of " +
                            std::to_string(m->keys.size()) + " bytes");
  batch->emplace_back();
  TETHER_RETURN_IF_ERROR(DecodeShardInput(
      std::string_view(static_cast<const char*>(m->keys.data()), b.payload_bytes()), peer, &batch->back()));
  received_ = b.seq();
  connected_ = true;
  return Status::OK();
}

void ReplicaHost::Ack(Clock::time_point now) {
  // A joining process is silent until the primary took it (its state
  // comes): an acknowledgement from a process the shard does not keep is
  // refused, and that refusal could answer its next REPLICA_HELLO.
  if (join_ && (asking_again_ || state_total_ == 0)) return;
  const int interval = std::max(50, config_.cluster().heartbeat_interval_ms());
  if (received_ == acked_ && MsBetween(last_ack_, now) < interval) return;
  Message ack;
  ack.header.set_type(REPLICATE_ACK);
  ack.header.set_shard_generation(generation_);
  ack.header.mutable_replicate_ack()->set_shard(shard_);
  ack.header.mutable_replicate_ack()->set_applied(received_);
  // A full queue (the primary stopped reading) is no reason to block: the
  // next turn acknowledges again.
  try {
    (void)dealer_.send(zmq::buffer(ack.header.SerializeAsString()), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    (void)dealer_.send(zmq::const_buffer(nullptr, 0), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    (void)dealer_.send(zmq::const_buffer(nullptr, 0), zmq::send_flags::dontwait);
  } catch (const zmq::error_t&) {
    return;
  }
  acked_ = received_;
  last_ack_ = now;
}

ReplicaHost::Step ReplicaHost::ReadMonitor() {
  Step step = Step::kGoOn;
  while (true) {
    zmq::message_t head, address;
    try {
      if (!monitor_.recv(head, zmq::recv_flags::dontwait)) break;
      if (head.more()) (void)monitor_.recv(address, zmq::recv_flags::dontwait);
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      break;
    }
    if (head.size() < 6) continue;
    uint16_t event = 0;
    std::memcpy(&event, head.data(), 2);
    if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      connected_ = true;
      failed_handshakes_ = 0;
    }
    // A key pair that does not match (or another server key) fails every
    // handshake with a protocol error, not a ZAP refusal.
    if ((event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL || event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) &&
        ++failed_handshakes_ >= kKnownBadHandshakes) {
      zap_status_ = 0;
      return Step::kKeyRefused;
    }
    if (event == ZMQ_EVENT_DISCONNECTED && connected_) step = Step::kPrimaryGone;
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      std::memcpy(&zap_status_, static_cast<const char*>(head.data()) + 2, 4);
      return Step::kKeyRefused;
    }
  }
  return step;
}

Status ReplicaHost::ClaimAndServe(Clock::time_point gone_at) {
  // What the primary sent before it went is in the queue: applied first.
  Status result;
  if (DrainPrimary(&result) == Step::kEnded) return result;
  (void)zmq_socket_monitor(dealer_.handle(), nullptr, 0);
  dealer_.close();
  LOG(WARNING) << log_prefix_ << "shard " << shard_ << "'s primary at " << primary_endpoint_ << " is gone; "
               << applied_ << " entries applied here; claiming the shard";
  // The pause the shard's workers saw: from the primary's last message
  // (its connection probes come every 100 ms) to the claim.
  const auto now = Clock::now();
  const int64_t ms = MsBetween(last_heard_, now);
  copy_->Claim(generation_ + 1, ms / 1000.0, slot_);
  claimed_.store(true);
  // Workers that never reached the dead primary, and processes that join
  // the shard as its replica, look it up there.
  if (!config_.cluster().rendezvous().empty()) PublishClaim();
  if (stop_.load()) copy_->Stop();
  LOG(INFO) << log_prefix_ << "serving shard " << shard_ << " " << MsBetween(gone_at, now)
            << " ms after its primary was found gone, " << ms << " ms after its last message";
  return copy_->Run();
}

void ReplicaHost::StopAfterWorkers(std::chrono::milliseconds grace) {
  if (claimed_.load()) {
    copy_->StopAfterWorkers(grace);
    return;
  }
  Stop();
}

void ReplicaHost::Stop() {
  stop_.store(true);
  if (claimed_.load()) copy_->Stop();
}

}  // namespace tether
