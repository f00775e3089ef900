#include "server/server.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>

#include "core/env.h"
#include "core/net/curve.h"
#include "core/net/transport.h"
#include "core/net/value_frames.h"
#include "core/wire_limits.h"
#include "core/partition.h"
#include "server/shard_memory.h"

namespace tether {
namespace {

using SteadyClock = std::chrono::steady_clock;

int64_t MsSince(SteadyClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - t).count();
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

MembershipOptions MembershipOptionsFor(const JobConfig& config, int shard) {
  MembershipOptions o;
  o.shard = shard;
  o.num_shards = config.cluster().num_servers();
  o.job_id = JobId(config);
  o.generation = config.cluster().generation();
  o.model = config.consistency().model();
  o.initial_workers = config.cluster().num_workers();
  o.max_workers = MaxWorkers(config.cluster());
  o.startup_timeout_ms = config.cluster().startup_timeout_ms();
  o.worker_timeout_ms = config.cluster().worker_timeout_ms();
  o.liveness_timeout_ms = config.cluster().liveness_timeout_ms();
  o.on_worker_timeout = config.cluster().on_worker_timeout();
  return o;
}

}  // namespace

ServerShard::ServerShard(const JobConfig& config, int shard, zmq::context_t* context, const std::string& holder)
    : config_(config),
      shard_(shard),
      num_shards_(config.cluster().num_servers()),
      job_id_(JobId(config)),
      incarnation_(DrawIncarnation()),
      holder_(holder),
      log_prefix_(holder.empty() ? "[server " + std::to_string(shard) + "] "
                                 : "[" + holder + ", shard " + std::to_string(shard) + "] "),
      initial_workers_(config.cluster().num_workers()),
      clocks_(config.cluster().num_workers(), EffectiveStaleness(config.consistency())),
      own_ctx_(context == nullptr ? std::make_unique<zmq::context_t>(1) : nullptr),
      ctx_(context == nullptr ? own_ctx_.get() : context),
      outbox_(log_prefix_, incarnation_, &drain_requested_, &stats_),
      members_(MembershipOptionsFor(config, shard), &clocks_, &stats_, &outbox_),
      kv_(shard, num_shards_, &clocks_, &stats_, &outbox_),
      checks_(shard, num_shards_, MaxWorkers(config.cluster()), config.cluster().max_workers() > 0, &kv_.tables(),
              &members_),
      coordinator_(shard == kCoordinatorShard
                       ? MakeLocalCoordinator({config.cluster().num_workers(), MaxWorkers(config.cluster()), log_prefix_},
                                              &outbox_)
                       : nullptr),
      round_(shard, num_shards_, {&kv_, &clocks_, &members_, coordinator_.get(), &kept_}, &stats_, &outbox_) {
  if (config.cluster().replicas() > 0) {
    ReplyCacheOptions o;
    // Every rank a job can have, each restarted a few times, stays known.
    o.identities = std::max(o.identities, 4 * MaxWorkers(config.cluster()));
    replies_ = std::make_unique<ReplyCache>(o);
    outbox_.set_reply_cache(replies_.get());
  }
}

ServerShard::~ServerShard() {
  // Stop the monitor before the socket it watches closes (its PAIR end
  // closes first).
  if (guard_ != nullptr && socket_.handle() != nullptr) (void)zmq_socket_monitor(socket_.handle(), nullptr, 0);
}

Status ServerShard::Bind(const std::string& endpoint) {
  SocketOptions opts;
  opts.send_timeout_ms = config_.cluster().request_timeout_ms();
  opts.send_hwm = config_.cluster().send_hwm();
  opts.recv_hwm = ShardQueueFrames(config_.cluster().recv_hwm());
  // Pushes arrive in frames of this size (core/net/chunk_wire.h).
  opts.max_frame_bytes = static_cast<int64_t>(kShardFrameBytes + kListenerFrameSlackBytes);
  if (const int liveness = config_.cluster().liveness_timeout_ms(); liveness > 0) {
    // A worker whose host vanished (no TCP close) loses its connection here
    // too, within liveness_timeout_ms, so that the worker restarted
    // elsewhere can claim its rank again (Membership::Check). The same
    // bounds as the workers' side (RequestChannel::Connect).
    opts.heartbeat_ivl_ms = std::max(25, liveness / 4);
    opts.heartbeat_timeout_ms = std::max(50, liveness);
  }
  size_t authorized = 0;
  // A copy too: a replica may join it once it claimed the shard.
  const bool replicated = config_.cluster().replicas() > 0;
  if (config_.security().has_curve() && endpoint.rfind("inproc://", 0) != 0) {
    std::vector<std::string> keys;
    TETHER_ASSIGN_OR_RETURN(opts.curve, CurveServerOptions(config_.security().curve(), &keys));
    authorized = keys.size();
    // A replica host connects with the servers' own pair (ReplicaLink::set_replica_key).
    if (replicated) keys.push_back(opts.curve.public_key);
    // Running before the bind: libzmq admits every CURVE client while no
    // ZAP handler is there.
    TETHER_ASSIGN_OR_RETURN(zap_, ZapHandler::Start(*ctx_, keys, log_prefix_));
  }
  if (endpoint.rfind("inproc://", 0) != 0) {
    // Before the bind, so that no connection is accepted unseen.
    const int handshakes = opts.curve.enabled() ? ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                                                      ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                                      ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                                                : 0;
    TETHER_ASSIGN_OR_RETURN(guard_, ListenerGuard::Create(*ctx_, "server", ListenerGuard::Limits{}, handshakes, &opts,
                                                          log_prefix_));
  }
  TETHER_ASSIGN_OR_RETURN(socket_, BindRouter(*ctx_, endpoint, opts, &endpoint_));
  if (!replaying_) outbox_.set_socket(&socket_);
  server_key_ = opts.curve.public_key;
  if (replicated && !replaying_) StartLink(std::make_unique<ReplicaLink>(config_, shard_, log_prefix_));
  members_.set_endpoint(endpoint_);
  if (opts.curve.enabled()) {
    LOG(INFO) << log_prefix_ << "CURVE on: traffic encrypted, " << authorized
              << " worker key(s) admitted (security.curve.authorized_keys), server public key "
              << opts.curve.public_key;
  } else if (const std::string warning = UnauthenticatedBindWarning("server " + std::to_string(shard_), endpoint_);
             !warning.empty()) {
    LOG(WARNING) << log_prefix_ << warning;
  }
  // A copy (BeginCopy) listens for the moment it claims the shard; until
  // then it is not the shard's server.
  const std::string copy_tag =
      "[" + (holder_.empty() ? "" : holder_ + ", ") + "copy of shard " + std::to_string(shard_) + "] ";
  LOG(INFO) << (replaying_ ? copy_tag : log_prefix_) << "listening on " << endpoint_ << ", shard " << shard_ << "/" << num_shards_ << " of job '" << job_id_ << "' generation " << config_.cluster().generation() << ", staleness "
            << StalenessName(clocks_.staleness()) << ", " << members_.slots()
            << " workers; tables come with worker 0's HELLO; process start id " << IncarnationHex(incarnation_);
  return Status::OK();
}

// ---- The loop

Status ServerShard::Run() {
  Status st = RunLoop();
  if (members_.AnswerHeldByes(st) > 0) outbox_.LingerOnClose();  // the socket closes with the shard
  if (!st.ok()) FailWaitingRequests(st);
  if (link_ != nullptr && link_->stepped_down().ok()) {
    // The job's outcome is every member's: what is held leaves, and the
    // replica ends with the shard instead of claiming it.
    outbox_.ReleaseAll();
    link_->Finish(st);
    outbox_.LingerOnClose();
  }
  if (tick_listener_) tick_listener_(true);
  return st;
}

void ServerShard::FailWaitingRequests(const Status& why) {
  // The workers this shard holds waiting (a HELLO for worker 0's, a pull on
  // the staleness bound, the barrier, an evaluation gather) learn why the
  // job ends, rather than only that this shard's connection dropped.
  int told = members_.FailWaiting(why.message()) + kv_.FailWaiting(why.message());
  if (coordinator_ != nullptr) told += coordinator_->FailWaiting(why.message());
  if (told == 0) return;
  LOG(INFO) << log_prefix_ << "told " << told << " waiting request(s) why the job ends";
  outbox_.LingerOnClose();  // the socket closes with the shard
}

Status ServerShard::RunLoop() {
  started_ = last_message_ = last_poll_ = SteadyClock::now();
  zmq::pollitem_t items[] = {{socket_.handle(), 0, ZMQ_POLLIN, 0},
                             {guard_ != nullptr ? guard_->handle() : nullptr, 0, ZMQ_POLLIN, 0}};
  const size_t num_items = guard_ != nullptr ? 2 : 1;
  while (!stop_.load()) {
    ForgiveOwnStall(SteadyClock::now());
    try {
      zmq::poll(items, num_items, std::chrono::milliseconds(100));
    } catch (const zmq::error_t& e) {
      // A signal interrupted the poll: look at the stop flag it may have set.
      if (e.num() == EINTR) continue;
      return Status::IOError(log_prefix_ + "poll: " + e.what());
    }
    Status why;
    if ((items[0].revents & ZMQ_POLLIN) && !DrainSocket(&why)) return why;
    TETHER_RETURN_IF_ERROR(TickReplicaLink());
    TETHER_RETURN_IF_ERROR(TakeCannotRun());
    if (num_items > 1 && (items[1].revents & ZMQ_POLLIN)) TakeListenerEvents();
    if (tick_listener_) tick_listener_(false);
    if (!round_.load_failed().ok()) {
      if (LoadFailedDone()) return round_.load_failed();
      continue;
    }
    if (!aborted_.ok()) return aborted_;
    TETHER_RETURN_IF_ERROR(CheckWorkerTimeouts());
    if (members_.AllGone()) break;
    if (drain_requested_.load() && DrainDone()) break;
    if (Status st = members_.CheckStartup(any_hello_, SteadyClock::now()); !st.ok()) {
      outbox_.LingerOnClose();  // a refusal just sent still reaches its worker
      return st;
    }
    members_.ReportJoinWait(started_, SteadyClock::now());
    if (!any_hello_ && MsSince(started_) > config_.cluster().startup_timeout_ms())
      return Status::DeadlineExceeded(log_prefix_ + "no worker said hello within cluster.startup_timeout_ms=" +
                                      std::to_string(config_.cluster().startup_timeout_ms()));
    if (MsSince(last_message_) > config_.cluster().idle_timeout_ms())
      return Status::DeadlineExceeded(log_prefix_ + "no message for cluster.idle_timeout_ms=" +
                                      std::to_string(config_.cluster().idle_timeout_ms()) + "; workers gone?");
  }
  return Finish();
}

bool ServerShard::DrainSocket(Status* why) {
  Message m;
  std::string identity;
  // Everything queued is handled before going back to poll.
  while (true) {
    Status st = inbox_.Recv(socket_, &m, &identity);
    if (st.code() == Status::Code::kUnavailable) return true;
    if (!st.ok()) {
      ++stats_.bad_messages;
      LogRefusal(identity, st);
      if (!identity.empty()) outbox_.SendError(identity, m.header, st.message());
      continue;
    }
    if (link_ == nullptr && (m.header.type() == REPLICA_HELLO || m.header.type() == REPLICATE_ACK)) {
      RefuseReplica(identity, m.header);
      continue;
    }
    if (link_ != nullptr && link_->Take(identity, m, inbox_.peer_key(), SteadyClock::now())) {
      outbox_.ReleaseCommitted();
      continue;
    }
    last_message_ = SteadyClock::now();
    if (input_listener_) input_listener_(identity, m);
    if (link_ != nullptr) link_->Append(identity, m);
    Take(identity, &m);
    if (*why = Fatal(); !why->ok()) return false;
    // A drain can last long under load: the listener sees it too.
    if (tick_listener_) tick_listener_(false);
  }
}

void ServerShard::LogRefusal(const std::string& identity, const Status& why) {
  // A worker's bad message is activity; a peer that never said HELLO
  // neither keeps the shard from its idle timeout nor floods its log: its
  // first 10 refusals are logged, then every 1,000th, with the count.
  if (!identity.empty() && inbox_.admitted(identity)) {
    last_message_ = SteadyClock::now();
    LOG(ERROR) << log_prefix_ << why.message();
    return;
  }
  ++refused_unadmitted_;
  if (refused_unadmitted_ <= 10 || refused_unadmitted_ % 1000 == 0)
    LOG(ERROR) << log_prefix_ << why.message() << " (" << refused_unadmitted_
               << " message(s) refused from peers not admitted so far)";
}

void ServerShard::Take(const std::string& identity, Message* m) {
  stats_.bytes_in += m->keys.size() + (m->received_values_bytes > 0 ? m->received_values_bytes : m->values_size());
  if (replies_ != nullptr && !FirstTake(identity, *m)) return;
  // A 16-bit push is widened once here: the checks and the step read float32.
  WidenValues(m, kv_.frame_pool());
  if (m->header.type() == HELLO) any_hello_ = true;
  // A decision of the primary's timers comes only from its log, never from
  // a peer (a worker's is refused by the checks as any unexpected type).
  if (m->header.type() == SHARD_DECISION && replaying_ && identity.empty()) {
    ReplayDecision(m->header.shard_decision());
    return;
  }
  Handle(identity, m);
}

Status ServerShard::Fatal() const {
  if (!fatal_.ok()) return fatal_;
  if (!kv_.fatal().ok()) return kv_.fatal();
  return round_.fatal();
}

bool ServerShard::LoadFailedDone() {
  // HELLOs held for worker 0's are refused now; the shard ends once every
  // initial rank was told, or kLoadFailedLingerMs after the failure.
  members_.RefuseWaiting(round_.load_failed_why());
  // The last refusal is given half a second to reach its worker before the
  // socket closes (a worker that sees the shard disconnect first would wait
  // out its liveness timeout instead of reading why).
  const int told = members_.InitialRanksRefused();
  // A rank that never comes (not started, or stopped by the others'
  // failure) holds it at most kLoadFailedLingerMs: the job cannot run
  // anyway, and whoever started this server by hand learns it now.
  const bool linger_spent =
      std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - round_.load_failed_at()).count() >
      kLoadFailedLingerMs;
  if (!(told == initial_workers_ && MsSince(last_message_) > 500) && !linger_spent) return false;
  LOG(ERROR) << log_prefix_ << "told " << told << " of " << initial_workers_
             << " worker(s) that this server could not load its checkpoint"
             << (told < initial_workers_ ? "; not waiting for the others (" + std::to_string(kLoadFailedLingerMs) +
                                               " ms since it failed)"
                                         : std::string());
  outbox_.LingerOnClose();  // the refusals leave before the socket closes
  return true;
}

bool ServerShard::DrainDone() {
  // A stop that reached the whole job: serve the workers' stop checkpoint
  // and BYE first (StopAfterWorkers).
  const int staying = members_.Staying();
  // Before every worker joined nobody trains (the first evaluation
  // exchange waits for all): there is no stop checkpoint to serve.
  if (const int missing = members_.MissingInitial(); missing > 0 && staying > 0) {
    LOG(INFO) << log_prefix_ << "stop requested before " << missing
              << " worker(s) joined: nothing to checkpoint, stopping now";
    return true;
  }
  const int64_t grace_ms = drain_grace_ms_.load();
  if (!drain_deadline_) {
    drain_deadline_ = SteadyClock::now() + std::chrono::milliseconds(grace_ms);
    checkpoint_before_stop_ = round_.last_clock();
    // The stop may have reached this server alone (a preempted node): every
    // worker is told now (and by each reply from here on), and leaves as on
    // its own stop signal, after a stop checkpoint when it has a checkpoint
    // dir (RequestChannel::server_stopping).
    for (const std::string& identity : members_.StayingIdentities()) outbox_.TellStopping(identity);
    if (grace_ms <= 0) {
      LOG(WARNING) << log_prefix_ << "stop requested with no grace to serve a stop checkpoint (tether-server "
                   << "--stop_grace_s=0): told " << staying << " worker(s) to leave, stopping now";
      outbox_.LingerOnClose();  // the workers are told before the socket closes
      return true;
    }
    LOG(INFO) << log_prefix_ << "stop requested: asking " << staying
              << " worker(s) to take a stop checkpoint and leave; serving them for up to " << grace_ms / 1000.0
              << " s (tether-server --stop_grace_s)";
  }
  if (staying == 0) return true;
  if (StayingAllUnreachable()) {
    LOG(WARNING) << log_prefix_ << "stop requested: the " << staying << " worker(s) still listed have had no "
                 << "connection to this server for " << kUnreachableDrainMs
                 << " ms (gone without a goodbye); stopping without waiting for them";
    return true;
  }
  if (SteadyClock::now() < *drain_deadline_) return false;
  LOG(WARNING) << log_prefix_ << "stop requested: " << staying << " worker(s) still here after " << grace_ms / 1000.0
               << " s (tether-server --stop_grace_s); stopping"
               << (round_.last_clock() > checkpoint_before_stop_
                       ? std::string()
                       : " without a stop checkpoint (a resume starts from the latest complete one)");
  return true;
}

bool ServerShard::StayingAllUnreachable() {
  // A ROUTER holds a route while the worker's connection lives (and
  // through a reconnect it holds again): a probe with no route
  // (ConnectionLive) for every staying worker, kUnreachableDrainMs on end,
  // means nobody is left to serve.
  for (const std::string& identity : members_.StayingIdentities()) {
    if (outbox_.ConnectionLive(identity)) {
      drain_unreachable_since_.reset();
      return false;
    }
  }
  const auto now = SteadyClock::now();
  if (!drain_unreachable_since_) drain_unreachable_since_ = now;
  return now - *drain_unreachable_since_ >= std::chrono::milliseconds(kUnreachableDrainMs);
}

Status ServerShard::Finish() {
  job_finished_ = members_.JobFinished();
  if (drain_requested_.load() && !stop_.load() && drain_deadline_) {
    const bool gone = members_.Staying() == 0;
    if (job_finished_)
      LOG(INFO) << log_prefix_ << "stop requested, but every worker finished the job meanwhile";
    else if (gone && round_.last_clock() > checkpoint_before_stop_)
      LOG(INFO) << log_prefix_ << "stop requested: every worker has left after the stop checkpoint at clock "
                << round_.last_clock();
    else if (gone)
      LOG(WARNING) << log_prefix_ << "stop requested: every worker has left without a stop checkpoint (none has a "
                   << "checkpoint dir, or it was not reached): the job ends without one";
  }
  LOG(INFO) << log_prefix_ << "done: " << stats_.pulls << " pulls (" << stats_.rows_pulled << " rows, "
            << stats_.deferred_pulls << " waited on the bound), " << stats_.pushes << " pushes ("
            << stats_.rows_pushed << " rows, " << stats_.updates_applied << " updates applied), "
            << stats_.bytes_in / 1e6 << " MB in, " << stats_.bytes_out / 1e6 << " MB out, " << stats_.bad_messages
            << " bad messages; staleness tau mean " << stats_.staleness.mean() << " max " << stats_.staleness.max
            << "; " << stats_.workers_timed_out << " workers timed out, " << stats_.workers_rejoined << " rejoined, "
            << stats_.workers_joined << " joined with a new rank";
  kv_.LogExit();
  if (const std::string again = replies_ != nullptr ? replies_->DescribeSentAgain() : ""; !again.empty())
    LOG(INFO) << log_prefix_ << again;
  if (stop_.load() || drain_requested_.load()) return Status::OK();
  // Every worker is gone, but a worker removed for silence never finished:
  // the job did not either, and the exit code must say so.
  const std::string removed = members_.Removed();
  if (removed.empty()) return Status::OK();
  if ((coordinator_ != nullptr && coordinator_->DataDone()) || members_.AnyDataDone()) {
    // Data on demand: their chunks were dealt again and every row of every
    // epoch was completed.
    LOG(WARNING) << log_prefix_ << "worker(s) " << removed << " fell silent and never came back; data on demand "
                 << "dealt their chunks again and every epoch's rows were completed";
    return Status::OK();
  }
  return Status::Unavailable(log_prefix_ + "the job did not finish: worker(s) " + removed +
                             " fell silent (cluster.worker_timeout_ms=" +
                             std::to_string(config_.cluster().worker_timeout_ms()) +
                             ") and never came back to reach the barrier or say BYE");
}

void ServerShard::TakeListenerEvents() {
  for (const ListenerGuard::Event& e : guard_->Poll())
    handshakes_.Record(static_cast<uint16_t>(e.event), static_cast<uint32_t>(e.value), endpoint_, log_prefix_);
}

bool ServerShard::ForgiveOwnStall(SteadyClock::time_point now) {
  int64_t gap_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - last_poll_).count();
  last_poll_ = now;
  // The loop built a joiner's state meanwhile, witnessed running
  // (ReplicaLink::forgiven_busy_ms): no stall, but it read nothing then, so
  // the workers' silence is not theirs either.
  if (const int64_t forgiven = link_ != nullptr ? link_->forgiven_busy_ms() - busy_forgiven_ms_ : 0; forgiven > 0) {
    busy_forgiven_ms_ += forgiven;
    gap_ms -= forgiven;
    members_.SeenAll();
  }
  // The loop comes back every 100 ms at most, but for a long drain or a
  // checkpoint write (which mark everyone seen themselves): half the
  // workers' timeout without a turn is this process's own stall.
  const int64_t timeout_ms = config_.cluster().worker_timeout_ms();
  if (timeout_ms <= 0 || gap_ms <= timeout_ms / 2) return false;
  members_.SeenAll();
  LOG(WARNING) << log_prefix_ << "this server did not run for " << gap_ms
               << " ms (the process was stopped or starved): its workers' silence meanwhile is not theirs, and "
               << "none is removed for it (cluster.worker_timeout_ms=" << timeout_ms << ")";
  return true;
}

void ServerShard::AnswerRemoved(const std::string& identity, const MessageHeader& h, int rank) {
  const std::string why = "worker " + std::to_string(rank) + " " + members_.worker(rank).removed_why;
  if (h.type() == ABORT) {
    // A removed worker that fails is no longer the job's failure: the
    // others went on without it (its data on demand was dealt again).
    LOG(WARNING) << log_prefix_ << "ABORT from " << why << " ignored: the job goes on without it ("
                 << h.job_abort().reason() << ")";
    return;
  }
  ++stats_.bad_messages;
  Message removed;
  removed.header.set_type(REMOVED);
  removed.header.set_request_id(h.request_id());
  removed.header.mutable_removed()->set_reason(log_prefix_ + why +
                                              "; only a HELLO (the worker started again) takes its place back");
  outbox_.Send(identity, &removed, rank);
}

Status ServerShard::CheckWorkerTimeouts() {
  const auto now = SteadyClock::now();
  while (true) {
    TETHER_ASSIGN_OR_RETURN(const Membership::Silent silent, members_.NextSilent(now));
    if (silent.rank < 0) return Status::OK();
    if (link_ != nullptr) link_->Append("", DecisionInput(silent));
    LetGoOf(silent);
  }
}

void ServerShard::LetGoOf(const Membership::Silent& silent) {
  // A push it was sending is dropped; its HELLO would admit it again.
  inbox_.Forget(members_.worker(silent.rank).identity);
  kv_.WorkerRemoved(silent.rank);
  MinClockChanged(members_.RemoveSilent(silent));
  if (coordinator_ != nullptr) coordinator_->WorkerRemoved(silent.rank);
  round_.MaybeWrite();
  members_.ReleaseBarrier(coordinator_.get());
}

// ---- Dispatch

void ServerShard::Handle(const std::string& identity, Message* m) {
  const MessageHeader& h = m->header;
  if (h.type() == HEARTBEAT && members_.Waiting(h.sender_rank())) return;  // still joining
  if (h.type() == HELLO && members_.cannot_run()) {
    // Told why, whatever its rank: the job ends once every rank was.
    return members_.RefuseAtStart(identity, *m);
  }
  if (AbortFromReplacedProcess(h)) return;
  if (Status st = checks_.Check(identity, *m); !st.ok()) {
    ++stats_.bad_messages;
    LOG(ERROR) << log_prefix_ << st.message();
    outbox_.SendError(identity, h, st.message());
    members_.RefusedBeforeCheck(identity, h, st.message());
    return;
  }
  const int rank = h.sender_rank();
  members_.EnsureSlot(rank);
  members_.Seen(rank);
  if (members_.worker(rank).dead && h.type() != HELLO) return AnswerRemoved(identity, h, rank);
  if (h.type() == ABORT) {
    // A worker failed and says so (not one removed for silence, which only
    // leaves: RunWorker): the job cannot finish, and this shard ends with
    // that worker's reason. Run() returns it, and the caller logs it
    // (tools/server_main.cc). A shard that failed to load its checkpoint is
    // the cause, as is a job that cannot run: it stays to tell the workers
    // still to come (their ABORTs follow its refusals).
    if (aborted_.ok() && round_.load_failed().ok() && !members_.cannot_run())
      aborted_ = Status::Unavailable(log_prefix_ + "job aborted: " + h.job_abort().reason());
    return;
  }
  if ((h.type() == PULL || h.type() == PUSH) && config_.cluster().debug_request_delay_ms() > 0) {
    // Test/debug only: a slow server, so that the queues in front of it fill
    // (case C13, tests/transport_test.cc).
    std::this_thread::sleep_for(std::chrono::milliseconds(config_.cluster().debug_request_delay_ms()));
  }
  switch (h.type()) {
    case HELLO: return OnHello(identity, m);
    case PULL: return kv_.Pull(identity, m);
    case PUSH: return kv_.Push(identity, *m);
    case PUSH_DELTA: return kv_.PushDelta(identity, *m);
    case CLOCK: return OnClock(identity, h);
    case CHECKPOINT: return round_.Join(identity, h);
    case BARRIER: return OnBarrier(identity, h);
    case BYE: return OnBye(identity, h);
    case HEARTBEAT: return;
    case EVAL_GATHER:
    case CHUNK_NEXT: return OnCoordinatorRequest(identity, *m);
    case STATS: return OnStats(identity, h);
    case MODEL_CUT: return OnModelCut(identity, h);
    default:
      ++stats_.bad_messages;
      outbox_.SendError(identity, h, "unexpected message type " + TypeName(h.type()));
  }
}

bool ServerShard::AbortFromReplacedProcess(const MessageHeader& h) {
  const AbortBody& abort = h.job_abort();
  if (h.type() != ABORT || abort.known_server_incarnation() == 0 || abort.known_server_incarnation() == incarnation_ ||
      abort.job_id() != job_id_ || abort.generation() != config_.cluster().generation())
    return false;
  // A worker of this job failed, and it had joined another process on this
  // shard's address: this one replaced it (killed and started again by
  // hand) and the job it would serve is gone. It ends too, rather than wait
  // cluster.startup_timeout_ms for a HELLO that never comes.
  if (aborted_.ok() && round_.load_failed().ok() && !members_.cannot_run())
    aborted_ = Status::Unavailable(log_prefix_ + "job aborted: " + abort.reason() + " (this server, process start id " +
                                   IncarnationHex(incarnation_) + ", replaced the one worker " +
                                   std::to_string(h.sender_rank()) + " had joined, start id " +
                                   IncarnationHex(abort.known_server_incarnation()) + ")");
  return true;
}

void ServerShard::OnHello(const std::string& identity, Message* m) {
  const MessageHeader& h = m->header;
  const int rank = h.sender_rank();
  // This shard could not load its checkpoint: every worker is told so.
  if (!round_.load_failed().ok()) {
    members_.Refuse(identity, h, round_.load_failed_why());
    return;
  }
  if (members_.Check(identity, m, kv_.defined()) != Membership::Hello::kAdmit) return;
  const bool defines = !kv_.defined();  // worker 0's first HELLO
  if (const std::string why = defines ? SetUpTables(h.hello()) : MatchJob(h.hello(), rank); !why.empty()) {
    // Another table or resume than the job's is a worker's setting; tables
    // worker 0 declares badly are a malformed HELLO.
    members_.Refuse(identity, h, why, /*for_settings=*/!defines);
    return;
  }
  const uint64_t inherited =
      coordinator_ != nullptr ? coordinator_->WorkerJoined(rank, members_.worker(rank).said_hello) : 0;
  const std::string previous = members_.worker(rank).identity;
  Membership::Admission a = members_.Admit(rank, identity, round_.resume_clock());
  if (a.rejoined) a.rejoin_samples = inherited;
  // A rank back from another connection: the old one's push in progress,
  // if any, is never finished.
  if (!previous.empty() && previous != identity) inbox_.Forget(previous);
  inbox_.Admit(identity);  // its messages may now come in chunks
  kv_.WorkerJoined(rank, a.rejoined, key_list_bytes_per_worker());
  MinClockChanged(a.min_clock_changed);
  members_.Welcome(identity, h, a, key_list_bytes_per_worker());
  // Worker 0's HELLO is answered first; those that waited for it after it.
  for (auto& [waiting_identity, hello] : members_.TakeWaiting()) Handle(waiting_identity, &hello);
  round_.MaybeWrite();  // a round this process cannot take part in ends
}

std::string ServerShard::SetUpTables(const HelloBody& h) {
  std::vector<TableSpec> specs(h.tables().begin(), h.tables().end());
  if (specs.empty()) return "worker 0 declared no tables";
  const Status valid = ValidateTableSpecs(specs, num_shards_);
  if (!valid.ok()) return "worker 0 declared a bad table: " + valid.message();
  // Tables this shard cannot hold fail the job now, naming the sizes,
  // rather than the shard running out of memory mid-training. Process
  // shard_ also holds copies of the cluster.replicas shards before it, so
  // all of them are counted (a copy is one of those: its primary and its
  // own process counted it already, and it must take in what they took).
  keep_best_model_ = h.keep_best_model();
  const Status fits = replaying_ ? Status::OK()
                                 : CheckShardFits(specs, shard_, num_shards_, MemoryBudgetFor(config_),
                                                  keep_best_model_, config_.cluster().replicas());
  if (!fits.ok()) {
    fatal_ = fits;
    return fits.message();
  }
  // Worker 0 split this shard's budget across the tables; tables split from
  // another budget (or none) fail the job, as tables that do not fit do.
  if (const Status within = CheckShardWithinBudget(specs, shard_, num_shards_, memory_budget_bytes()); !within.ok()) {
    fatal_ = Status::ResourceExhausted("worker 0's tables do not keep within this shard's budget: " + within.message());
    return fatal_.message();
  }
  if (round_.Resuming(h)) return round_.Resume(h);
  kv_.DefineTables(h.tables());
  return "";
}

std::string ServerShard::MatchJob(const HelloBody& h, int rank) const {
  const std::string who = "worker " + std::to_string(rank);
  const int64_t resumed = round_.resume_clock();
  if (h.resume_clock() != resumed)
    return "resume differs: " + who +
           (h.resume_from().empty() ? " starts afresh"
                                    : " resumes from " + h.resume_from() + " at clock " + std::to_string(h.resume_clock())) +
           ", the job " + (resumed < 0 ? "started afresh" : "resumed at clock " + std::to_string(resumed)) +
           " (give every worker the same --resume_from)";
  const std::string diff = DiffTableSpecs(h.tables(), who, kv_.job_tables(), "the job (from worker 0)");
  return diff.empty() ? "" : "tables differ: " + diff;
}

void ServerShard::OnClock(const std::string& identity, const MessageHeader& h) {
  const int rank = h.sender_rank();
  // AVERAGE: the CLOCK ending a round carries the sender's weight; its
  // deltas join the round before the round can close (Advance below).
  const ClockBody& body = h.clock_report();
  if (body.has_parked()) {
    MinClockChanged(clocks_.Park(rank, body.parked()));
    return;
  }
  kv_.RoundEnded(rank, h.clock(), body.average_updates());
  if (clocks_.Advance(rank, h.clock())) {
    kv_.ServeReadyPulls();
    if (clock_listener_) clock_listener_(clocks_.min_clock());
  }
  // Only the shard hosting the job coordinator (shard 0) answers a CLOCK;
  // the others only count it, and the worker waits for no reply from them
  // (WorkerClient::Clock): an answer would reach it as one for no request.
  if (coordinator_ == nullptr) return;
  Message reply;
  reply.header.set_type(CLOCK_REPLY);
  reply.header.set_request_id(h.request_id());
  reply.header.set_min_clock(clocks_.settled_clock());
  // The job's part: the due checkpoint's clock, the next batch size.
  ClockReport report;
  report.rank = rank;
  report.want_checkpoint = body.want_checkpoint();
  report.adaptive = body.has_adaptive_batch() ? &body.adaptive_batch() : nullptr;
  if (body.has_samples()) report.samples = body.samples();
  report.latest_clock = LatestCountingClock();
  report.bound_wait_s = kv_.bound_wait_s(rank);
  report.now = SteadyClock::now();
  if (Status st = coordinator_->Clock(report, reply.header.mutable_clock_reply()); !st.ok()) {
    ++stats_.bad_messages;
    LOG(ERROR) << log_prefix_ << st.message();
    outbox_.SendError(identity, h, st.message());
    return;
  }
  outbox_.Send(identity, &reply, rank);
}

void ServerShard::OnBarrier(const std::string& identity, const MessageHeader& h) {
  const int rank = h.sender_rank();
  MinClockChanged(members_.Arrive(rank, identity, h));
  if (coordinator_ != nullptr) coordinator_->WorkerFinished(rank, h.barrier().samples(), h.barrier().finished());
  members_.ReleaseBarrier(coordinator_.get());
  round_.MaybeWrite();
}

void ServerShard::OnBye(const std::string& identity, const MessageHeader& h) {
  const int rank = h.sender_rank();
  kv_.WorkerLeft(rank, identity);
  MinClockChanged(members_.Leave(rank));
  if (coordinator_ != nullptr) coordinator_->WorkerLeft(rank);
  members_.AnswerBye(rank, identity, h);
  inbox_.Forget(identity);
  members_.ReleaseBarrier(coordinator_.get());
  round_.MaybeWrite();
}

void ServerShard::OnCoordinatorRequest(const std::string& identity, const Message& m) {
  const MessageHeader& h = m.header;
  const int rank = h.sender_rank();
  Status st;
  if (coordinator_ == nullptr) {
    st = Status::FailedPrecondition(
        h.type() == EVAL_GATHER
            ? "EVAL_GATHER from worker " + std::to_string(rank) + " sent to shard " + std::to_string(shard_) +
                  "; evaluation partials are gathered by shard 0"
            : "CHUNK_NEXT from worker " + std::to_string(rank) + " sent to shard " + std::to_string(shard_) +
                  ": shard 0 deals the chunks of data on demand");
    outbox_.SendError(identity, h, st.message());
  } else if (h.type() == EVAL_GATHER) {
    st = coordinator_->EvalGather(identity, m);
  } else {
    st = coordinator_->ChunkNext(identity, h, LatestCountingClock());
  }
  if (!st.ok()) ++stats_.bad_messages;
}

void ServerShard::OnStats(const std::string& identity, const MessageHeader& h) {
  Message reply;
  reply.header.set_type(STATS_REPLY);
  reply.header.set_request_id(h.request_id());
  *reply.header.mutable_stats_reply()->mutable_shard_stats() = SnapshotStats();
  outbox_.Send(identity, &reply, h.sender_rank());
}

void ServerShard::OnModelCut(const std::string& identity, const MessageHeader& h) {
  const ModelCutBody& body = h.model_cut();
  const std::string who = "MODEL_CUT from worker " + std::to_string(h.sender_rank());
  Status st;
  if (!keep_best_model_)
    st = Status::FailedPrecondition(who + ": worker 0's HELLO did not ask for train.keep_best_model");
  else if (body.epoch() < 1)
    st = Status::InvalidArgument(who + ": epoch " + std::to_string(body.epoch()) + " (must be ≥ 1)");
  if (st.ok() && !body.restore() && kept_.Keep(body.epoch(), kv_.tables())) {
    LOG(INFO) << log_prefix_ << "kept the weights at the end of epoch " << body.epoch() << " (the best so far): "
              << FormatBytes(kept_.bytes());
  } else if (st.ok() && body.restore()) {
    StatusOr<bool> restored = kept_.Restore(body.epoch(), &kv_.tables());
    if (!restored.ok()) st = restored.status().WithPrefix(who);
    if (restored.ok() && *restored)
      LOG(INFO) << log_prefix_ << "put back the weights kept at the end of epoch " << body.epoch()
                << " for the final evaluation";
  }
  if (!st.ok()) {
    ++stats_.bad_messages;
    outbox_.SendError(identity, h, st.message());
    return;
  }
  Message reply;
  reply.header.set_type(MODEL_CUT_REPLY);
  reply.header.set_request_id(h.request_id());
  reply.header.mutable_model_cut_reply()->set_kept_epoch(kept_.epoch());
  reply.header.mutable_model_cut_reply()->set_kept_bytes(kept_.bytes());
  outbox_.Send(identity, &reply, h.sender_rank());
}

void ServerShard::MinClockChanged(bool changed) {
  if (changed) kv_.ServeReadyPulls();
}

int64_t ServerShard::LatestCountingClock() const {
  int64_t latest = 0;
  for (int r = 0; r < clocks_.num_workers(); ++r)
    if (clocks_.Counts(r)) latest = std::max(latest, clocks_.clock(r));
  return latest;
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
  s.set_failover_seconds(stats_.failover_seconds);
  for (int r = 0; r < members_.StatsRanks(); ++r) {
    s.add_bound_wait_seconds(kv_.bound_wait_s(r));
    *s.add_workers() = members_.worker(r).stats;
  }
  if (coordinator_ != nullptr) {
    coordinator_->FillStats(&s);
  } else {  // deals no chunks
    s.set_chunks_dealt(0);
    s.set_chunks_redealt(0);
    s.set_rows_redealt(0);
  }
  kv_.FillStats(&s);
  return s;
}

}  // namespace tether
