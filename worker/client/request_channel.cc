#include "worker/client/request_channel.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <random>

#include <glog/logging.h>

#include "core/net/receive_heap.h"
#include "core/net/transport.h"
#include "core/net/value_frames.h"
#include "worker/client/resend_window.h"

namespace tether {

using SteadyClock = std::chrono::steady_clock;

// The shared state of one request. Handles count in `refs`; the channel keeps
// it while parts are in flight (`remaining` > 0) and recycles it when both
// are zero. `channel` is null once the channel is gone: the last handle then
// deletes it.
struct RequestState {
  RequestChannel* channel = nullptr;
  int refs = 0;
  int remaining = 0;
  bool sticky = false;
  Status status;
};

namespace {

// A request's id: a sequence number above the slot of its record in the
// pending table, so that ids never repeat and the slot is found at once.
constexpr int kSlotBits = 32;
constexpr uint64_t kSlotMask = (uint64_t{1} << kSlotBits) - 1;

int64_t MillisecondsSince(SteadyClock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - start).count();
}

}  // namespace

// ------------------------------------------------------------ RequestHandle

RequestHandle::RequestHandle(RequestState* state) : state_(state) {
  if (state_ != nullptr) ++state_->refs;
}

RequestHandle::RequestHandle(const RequestHandle& other) : RequestHandle(other.state_) {}

RequestHandle::RequestHandle(RequestHandle&& other) noexcept : state_(other.state_) { other.state_ = nullptr; }

RequestHandle& RequestHandle::operator=(RequestHandle other) noexcept {
  std::swap(state_, other.state_);
  return *this;
}

RequestHandle::~RequestHandle() {
  if (state_ == nullptr || --state_->refs > 0) return;
  if (state_->channel == nullptr) {
    delete state_;
  } else if (state_->remaining == 0) {
    state_->channel->Recycle(state_);
  }
}

bool RequestHandle::is_completed() const {
  if (state_ == nullptr) return true;
  // Take what has arrived; an error here is the channel's, and the next Wait
  // reports it.
  if (state_->remaining > 0 && state_->channel != nullptr) (void)state_->channel->Progress(0);
  return state_->remaining == 0;
}

Status RequestHandle::Wait() const {
  if (state_ == nullptr || state_->channel == nullptr) return status();
  return Wait(state_->channel->options_.request_timeout_ms);
}

Status RequestHandle::Wait(int timeout_ms) const {
  if (state_ == nullptr || state_->channel == nullptr) return status();
  return state_->channel->WaitFor(state_, timeout_ms);
}

void RequestHandle::AwaitOtherParts(int timeout_ms) const {
  if (state_ != nullptr && state_->channel != nullptr) state_->channel->AwaitParts(state_, timeout_ms);
}

Status RequestHandle::WaitFirstError() const {
  if (state_ == nullptr || state_->channel == nullptr) return status();
  return state_->channel->WaitFor(state_, state_->channel->options_.request_timeout_ms, /*first_error=*/true);
}

Status RequestHandle::status() const {
  if (state_ == nullptr) return Status::FailedPrecondition("empty request handle: no request was made");
  if (state_->remaining > 0) return Status::Unavailable("request in flight");
  return state_->status;
}

Status WaitAllOf(std::initializer_list<RequestHandle> handles) {
  Status first;
  for (const RequestHandle& h : handles) {
    Status st = h.Wait();
    if (first.ok() && !st.ok()) first = st;
  }
  return first;
}

Status WaitAllOf(const std::vector<RequestHandle>& handles) {
  Status first;
  for (const RequestHandle& h : handles) {
    Status st = h.Wait();
    if (first.ok() && !st.ok()) first = st;
  }
  return first;
}

// ------------------------------------------------------------ RequestChannel

RequestChannel::RequestChannel(const Options& options, ReplyHandler on_reply)
    : options_(options),
      on_reply_(std::move(on_reply)),
      log_prefix_("[worker " + std::to_string(options.rank) + "] "),
      own_ctx_(options.context == nullptr ? std::make_unique<zmq::context_t>(1) : nullptr),
      ctx_(options.context == nullptr ? own_ctx_.get() : options.context),
      frame_pool_(FramePool::Options{options.frame_pool_idle_bytes, kMinPooledFrameBytes}),
      outstanding_(options.servers.size(), 0),
      last_send_(options.servers.size(), SteadyClock::now()),
      links_(options.servers.size()),
      unconnected_sent_(options.servers.size()),
      // Half the liveness timeout without a turn is a stall of this
      // process; its consequences show within another liveness timeout.
      stall_(options.liveness_timeout_ms / 2, std::max(1000, options.liveness_timeout_ms)) {}

RequestChannel::~RequestChannel() {
  // Stop the monitors before their sockets close (the PAIR ends close first).
  for (int shard : monitor_shard_)
    if (shard < static_cast<int>(sockets_.size())) (void)zmq_socket_monitor(sockets_[shard].handle(), nullptr, 0);
  monitors_.clear();
  for (RequestState* s : states_) {
    if (s->refs == 0) {
      delete s;
      continue;
    }
    // A handle outlives the channel: it keeps its outcome, or learns that
    // its reply will never come.
    s->channel = nullptr;
    if (s->remaining > 0) {
      s->remaining = 0;
      if (s->status.ok())
        s->status = Status::Unavailable(log_prefix_ + "request abandoned: the worker's client was closed before "
                                                      "every reply arrived");
    }
  }
}

Status RequestChannel::Connect() {
  connect_time_ = SteadyClock::now();
  SocketOptions so;
  so.send_timeout_ms = options_.request_timeout_ms;
  so.send_hwm = options_.send_hwm;
  so.recv_hwm = options_.recv_hwm;
  so.connect_handshake_timeout_ms = kServerHandshakeTimeoutMs;
  std::random_device rd;
  const std::string identity =
      "w" + std::to_string(options_.rank) + "-" + std::to_string(getpid()) + "-" + std::to_string(rd());
  const int liveness = options_.liveness_timeout_ms;
  for (size_t shard = 0; shard < options_.servers.size(); ++shard) {
    const std::string& ep = options_.servers[shard];
    SocketOptions o = so;
    const bool networked = ep.rfind("tcp://", 0) == 0 || ep.rfind("ipc://", 0) == 0;
    if (networked) o.curve = options_.curve;
    // inproc:// has no connection that could drop: nothing to watch. With
    // CURVE the monitor also says why a server refused the handshake.
    if ((liveness > 0 || options_.curve.enabled()) && networked) {
      // A vanished host is found by ZMTP heartbeats (closed after
      // liveness_timeout_ms without traffic), a dead process by its closed
      // connection; either way the disconnect must then last
      // liveness_timeout_ms. libzmq counts a message as traffic only once it
      // has arrived whole, so the timeout must outlast the transfer of the
      // largest message: rows travel in messages of at most
      // ClientOptions::max_message_bytes (64 MiB by default), well under a
      // second each; with liveness/2 a 345 MB reply on a loaded host took
      // longer and the connection was dropped under it.
      if (liveness > 0) {
        o.heartbeat_ivl_ms = std::max(25, liveness / 4);
        o.heartbeat_timeout_ms = std::max(50, liveness);
      }
      o.monitor_events |= ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                          ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_CONNECTED | ZMQ_EVENT_CONNECT_RETRIED;
      o.monitor_endpoint = "inproc://tether-monitor-" + identity + "-" + std::to_string(shard);
      try {
        // Connected before the monitor binds (inproc allows it), so the
        // first event already has a reader.
        zmq::socket_t pair(*ctx_, zmq::socket_type::pair);
        pair.set(zmq::sockopt::linger, 0);
        pair.connect(o.monitor_endpoint);
        monitors_.push_back(std::move(pair));
      } catch (const zmq::error_t& e) {
        return Status::IOError(log_prefix_ + "cannot watch the connection to server " + ep + ": " + e.what());
      }
      monitor_shard_.push_back(static_cast<int>(shard));
      links_[shard].monitored = true;
    }
    if (options_.claim_lookup != nullptr) options_.claim_lookup->Known(static_cast<int>(shard), ep);
    TETHER_ASSIGN_OR_RETURN(zmq::socket_t s, ConnectDealer(*ctx_, ep, identity, o));
    sockets_.push_back(std::move(s));
    joiners_.push_back(NewJoiner(static_cast<int>(shard), ep));
    // Large pull replies come in chunks over a wire: their pages are kept
    // from one reply to the next (process-wide; core/net/receive_heap.h).
    if (ep.rfind("inproc://", 0) != 0 && !heap_padded_) heap_padded_ = PadReceiveHeaps();
  }
  for (auto& s : sockets_) poll_items_.push_back({s.handle(), 0, ZMQ_POLLIN, 0});
  for (auto& m : monitors_) poll_items_.push_back({m.handle(), 0, ZMQ_POLLIN, 0});
  if (options_.first_connect_timeout_ms > 0 && !monitors_.empty()) connect_report_.Start(connect_time_);
  return Status::OK();
}

RequestHandle RequestChannel::NewRequest(bool sticky) {
  RequestState* s;
  if (free_states_.empty()) {
    s = new RequestState;
    states_.push_back(s);
  } else {
    s = free_states_.back();
    free_states_.pop_back();
  }
  s->channel = this;
  s->remaining = 0;
  s->sticky = sticky;
  s->status = Status::OK();
  return RequestHandle(s);
}

void RequestChannel::Recycle(RequestState* request) { free_states_.push_back(request); }

int RequestChannel::Window() const {
  int window = options_.max_outstanding;
  for (int hwm : {options_.send_hwm, options_.recv_hwm})
    if (hwm > 0) window = std::min(window, hwm);
  return std::max(window, 1);
}

Status RequestChannel::Send(int shard, Message* m, const RequestHandle* request, MessageType expect, uint64_t tag,
                            int64_t stamp_clock) {
  RequestState* state = request != nullptr ? request->state_ : nullptr;
  // A gone shard takes nothing more: its queue would only fill and block.
  if (!gone_.ok() && !leaving_) {
    FailState(state, gone_);
    return gone_;
  }
  // Heartbeats (sent from inside Progress) skip the window: they are owed no
  // reply, so they cannot fill the receive queue the window protects. So do
  // a leaving worker's goodbyes, which must not wait on a stalled shard.
  if (m->header.type() == BYE) said_bye_ = true;
  if (m->header.type() != HEARTBEAT && !leaving_) {
    const int window = Window();
    if (outstanding_[shard] >= window) ++stats_.send_waits;
    while (outstanding_[shard] >= window) {
      Status st = Progress(options_.request_timeout_ms);
      if (!st.ok()) {
        FailState(state, st);
        return st;
      }
    }
  }
  const uint32_t slot = state != nullptr ? pending_.Take() : 0;
  const uint64_t id = (next_sequence_++ << kSlotBits) | slot;
  last_send_[shard] = SteadyClock::now();
  m->header.set_request_id(id);
  m->header.set_sender_rank(options_.rank);
  m->header.set_clock(stamp_clock >= 0 ? stamp_clock : clock_);
  stats_.bytes_sent += m->keys.size() + m->values.size();
  stats_.wire.CountSent(*m);
  if (state != nullptr) {
    pending_[slot] = Pending{id, state, shard, expect, tag};
    ++state->remaining;
    ++outstanding_[shard];
    ++in_flight_;
  }
  const bool kept = state != nullptr && KeepsCopies(shard);
  if (kept) unconnected_sent_[shard].push_back(SharedCopy(m));
  // A replicated shard's successor gets again what its primary may have
  // lost; a HEARTBEAT is owed nothing and never acknowledged. Kept while
  // no successor is known too: a replica that joins later takes over what
  // its primary left unanswered.
  Link& link = links_[shard];
  const bool chained = link.replicated && m->header.type() != HEARTBEAT;
  if (chained) link.unacked.Keep(m, /*owed_reply=*/state != nullptr);
  Status st = SendMessage(sockets_[shard], m, nullptr, "server " + std::to_string(shard) + " (" +
                                                         options_.servers[shard] + ")");
  if (st.ok()) return st;
  if (kept) unconnected_sent_[shard].pop_back();
  if (chained) link.unacked.DropNewest();
  if (state != nullptr) {
    pending_[slot].id = 0;
    pending_.Give(slot);
    --state->remaining;
    --outstanding_[shard];
    --in_flight_;
  }
  FailState(state, st);
  return st;
}

void RequestChannel::Fail(const RequestHandle& request, const Status& error) { FailState(request.state_, error); }

void RequestChannel::FailState(RequestState* request, const Status& error) {
  if (request == nullptr || request->sticky) {
    if (sticky_error_.ok()) sticky_error_ = error;
  }
  if (request != nullptr && request->status.ok()) request->status = error;
}

void RequestChannel::PartDone(RequestState* request) {
  if (--request->remaining == 0 && request->refs == 0) Recycle(request);
}

bool RequestChannel::InFlight(uint64_t id) const {
  const uint64_t slot = id & kSlotMask;
  return id != 0 && slot < pending_.size() && pending_[static_cast<uint32_t>(slot)].id == id;
}

ReplyJoiner RequestChannel::NewJoiner(int shard, const std::string& endpoint) {
  ReplyJoiner::Placer place;
  if (values_placer_)
    place = [this, shard](const MessageHeader& h, uint64_t bytes) { return PlaceValues(shard, h, bytes); };
  return ReplyJoiner("server " + endpoint, kMaxFrameBytes, &frame_pool_, std::move(place));
}

char* RequestChannel::PlaceValues(int shard, const MessageHeader& h, uint64_t bytes) {
  const uint64_t id = h.request_id();
  if (!InFlight(id)) return nullptr;
  const Pending& p = pending_[static_cast<uint32_t>(id & kSlotMask)];
  const Link& link = links_[shard];
  // Anything DrainReplies could drop (another process, generation or
  // shard) is joined and judged there as before.
  if (p.shard != shard || p.expect != PULL_REPLY) return nullptr;
  if (h.shard_generation() != 0 && h.shard_generation() != link.generation) return nullptr;
  if (h.server_incarnation() != 0 && link.incarnation != 0 && h.server_incarnation() != link.incarnation)
    return nullptr;
  return values_placer_(p.tag, h, bytes);
}

void RequestChannel::Dispatch(Message* reply) {
  const MessageHeader& h = reply->header;
  const uint64_t id = h.request_id();
  const uint64_t slot = id & kSlotMask;
  if (!InFlight(id)) {
    LOG(WARNING) << log_prefix_ << "reply " << TypeName(h.type()) << " for unknown request " << id << "; ignored";
    return;
  }
  const Pending p = pending_[static_cast<uint32_t>(slot)];
  pending_[static_cast<uint32_t>(slot)].id = 0;
  pending_.Give(static_cast<uint32_t>(slot));
  --outstanding_[p.shard];
  --in_flight_;
  Status verdict;
  if (h.type() == ERROR_REPLY) {
    verdict = Status::FailedPrecondition(ErrorText(h));
  } else if (h.type() != p.expect) {
    verdict = Status::DataLoss("server " + std::to_string(p.shard) + " answered " + TypeName(h.type()) +
                               " to a request expecting " + TypeName(p.expect));
  }
  RequestState* const outer = replying_to_;  // a reply handled inside a handler's Send (nested Progress)
  replying_to_ = p.request;
  Status st = on_reply_(p.tag, verdict, reply);
  replying_to_ = outer;
  if (!st.ok()) FailState(p.request, st);
  PartDone(p.request);
}

Status RequestChannel::SendFromReply(int shard, Message* m, MessageType expect, uint64_t tag, int64_t stamp_clock) {
  if (replying_to_ == nullptr) return Status::FailedPrecondition(log_prefix_ + "SendFromReply outside a reply handler");
  const RequestHandle request(replying_to_);  // its part in hand keeps it from being recycled
  return Send(shard, m, &request, expect, tag, stamp_clock);
}

void RequestChannel::SendHeartbeats() {
  const auto now = SteadyClock::now();
  const auto interval = std::chrono::milliseconds(options_.heartbeat_interval_ms);
  for (int s = 0; s < num_shards(); ++s) {
    if (now - last_send_[s] < interval) continue;  // it heard from us lately
    if (!shard_up(s)) continue;  // queued for a reconnect that may never come
    Message m;
    m.header.set_type(HEARTBEAT);
    (void)Send(s, &m, nullptr, MSG_UNKNOWN, 0);  // a failure is sticky
  }
}

Status RequestChannel::CheckInterrupts() {
  if (options_.abort != nullptr && options_.abort->load())
    return Status::Unavailable(log_prefix_ + "aborted: another worker of this process failed");
  if (!leaving_ && options_.stop_requested && options_.stop_requested())
    return Status::Unavailable(log_prefix_ + "stop requested");
  return CheckLiveness();
}

void RequestChannel::BeginLeaving(int bound_ms) {
  leaving_ = true;
  bound_ms = std::max(0, bound_ms);
  for (int s = 0; s < num_shards(); ++s) {
    try {
      sockets_[s].set(zmq::sockopt::sndtimeo, bound_ms);
      sockets_[s].set(zmq::sockopt::linger, shard_up(s) ? bound_ms : 0);
    } catch (const zmq::error_t&) {
      // A socket that refuses an option keeps its own bounds (linger 0).
    }
  }
}

int RequestChannel::SendAbort(const std::string& why, int bound_ms, const std::string& job_id,
                              uint64_t generation, const std::vector<bool>& skip) {
  BeginLeaving(bound_ms);
  int sent = 0;
  for (int s = 0; s < num_shards(); ++s) {
    if (!shard_up(s) || (static_cast<size_t>(s) < skip.size() && skip[static_cast<size_t>(s)])) continue;
    Message m;
    m.header.set_type(ABORT);
    AbortBody& body = *m.header.mutable_job_abort();
    body.set_reason(why);
    // The process this worker knew on the shard: a new one there ends too.
    if (links_[s].incarnation != 0) body.set_known_server_incarnation(links_[s].incarnation);
    if (!job_id.empty()) {
      body.set_job_id(job_id);
      body.set_generation(generation);
    }
    if (Send(s, &m, nullptr, MSG_UNKNOWN, 0).ok()) ++sent;
  }
  return sent;
}

Status RequestChannel::Progress(int timeout_ms) {
  const auto start = SteadyClock::now();
  const size_t num_data = sockets_.size();
  bool data = false;
  // Only time blocked here counts as waiting for a reply: one queued while
  // the worker computed is taken below, not reported as missing.
  reply_report_.Stop();
  while (true) {
    TETHER_RETURN_IF_ERROR(CheckInterrupts());
    ReportWaits();
    FollowMovedShards();
    FollowClaims();
    // Poll in short slices: a worker blocked on the staleness bound must
    // still look alive to the servers (heartbeats, to every shard it has
    // not sent to for an interval, whichever shards it talks to meanwhile),
    // and see an abort, a stop request or a gone shard within kStopPollMs.
    SendHeartbeats();
    const int64_t waited = MillisecondsSince(start);
    const int64_t slice = std::max<int64_t>(
        0, std::min<int64_t>({timeout_ms - waited, int64_t{options_.heartbeat_interval_ms}, int64_t{kStopPollMs}}));
    int n = 0;
    try {
      n = zmq::poll(poll_items_.data(), poll_items_.size(), std::chrono::milliseconds(slice));
    } catch (const zmq::error_t& e) {
      // A signal (SIGTERM, SIGINT) interrupted the poll: not an error; the
      // top of the loop looks at the stop request it may have made.
      if (e.num() == EINTR) continue;
      return Status::IOError(log_prefix_ + "poll: " + e.what());
    }
    stall_.Turn(SteadyClock::now(), slice);  // before the events: a drop may be this stall's doing
    if (n > 0) {
      for (size_t i = num_data; i < poll_items_.size(); ++i)
        if (poll_items_[i].revents & ZMQ_POLLIN) TakeMonitorEvents(static_cast<int>(i - num_data));
      for (size_t i = 0; i < num_data; ++i) data = data || (poll_items_[i].revents & ZMQ_POLLIN) != 0;
      if (data) break;
    }
    if (MillisecondsSince(start) >= timeout_ms) break;
  }
  if (!data) {
    TETHER_RETURN_IF_ERROR(CheckInterrupts());
    std::string silent;
    for (int s = 0; s < num_shards(); ++s)
      if (outstanding_[s] > 0) silent += (silent.empty() ? "" : ", ") + options_.servers[s];
    return Status::DeadlineExceeded(log_prefix_ + "no reply within " + std::to_string(timeout_ms) +
                                    " ms from server(s) " + silent);
  }
  for (int s = 0; s < num_shards(); ++s) {
    if (!(poll_items_[s].revents & ZMQ_POLLIN)) continue;
    Link& link = links_[s];
    if (!link.ever_connected) link.ever_connected = link.connected = true;  // its handshake event was missed
    TETHER_RETURN_IF_ERROR(DrainReplies(s));
  }
  return Status::OK();
}

Status RequestChannel::DrainReplies(int s) {
  // A reply's frames are freed when `reply` goes (or is overwritten): over
  // inproc they are the shard's pooled buffers, which it can reuse only then.
  Message reply;
  while (true) {
    // A chunked reply is joined here as its chunks arrive; what follows
    // sees it as a whole one.
    Status st = joiners_[s].Recv(sockets_[s], &reply);
    if (st.code() == Status::Code::kUnavailable) break;
    if (!st.ok()) return Status::DataLoss(log_prefix_ + st.message());
    if (!CurrentGeneration(s, reply.header) || !SameServerProcess(s, reply.header.server_incarnation())) continue;
    if (reply.header.chain_endpoints_size() > 0) FollowNewChain(s, reply.header);
    if (reply.header.server_stopping() && stopping_shard_ < 0) {
      stopping_shard_ = s;
      LOG(WARNING) << log_prefix_ << "server " << options_.servers[s] << " (shard " << s
                   << ") was told to stop: the job ends now";
    }
    // A server checks that this connection is still live before it refuses
    // a second claim on this rank (ServerShard::ConnectionLive): nothing to
    // answer.
    if (reply.header.type() == HEARTBEAT) continue;
    if (reply.header.type() == REMOVED) {
      // The shard removed this worker (silent past cluster.worker_timeout_ms):
      // every wait fails with the shard's reason, not with what follows
      // (refused requests, the shard's connection dropping when it ends).
      if (removed_.ok()) {
        removed_ = Status::FailedPrecondition(log_prefix_ + reply.header.removed().reason());
        LOG(ERROR) << removed_.message();
      }
      gone_ = removed_;
      sticky_error_ = removed_;
      continue;
    }
    if (links_[s].replicated && !Acknowledge(s, reply.header)) continue;
    stats_.bytes_received += reply.values_size() + reply.keys.size();
    stats_.bytes_placed += reply.placed_values_bytes;
    stats_.wire.CountReceived(reply);
    // A 16-bit reply is widened once here: everything after reads float32
    // (a pull's, with widen_pull_replies off, by the handler, into the
    // caller's buffer).
    if (options_.widen_pull_replies || reply.header.type() != PULL_REPLY) WidenValues(&reply, &frame_pool_);
    Dispatch(&reply);
  }
  return Status::OK();
}

Status RequestChannel::WaitFor(RequestState* request, int timeout_ms, bool first_error) {
  const auto start = SteadyClock::now();
  Status result;
  while (true) {
    if (request->remaining == 0 || (first_error && !request->status.ok())) {
      result = request->status;
      break;
    }
    const int64_t left_ms = timeout_ms - MillisecondsSince(start);
    if (left_ms <= 0) {
      result = Status::DeadlineExceeded(log_prefix_ + "request not answered within " + std::to_string(timeout_ms) +
                                        " ms");
      break;
    }
    Status st = Progress(static_cast<int>(left_ms));
    if (!st.ok()) {
      result = first_error && !request->status.ok() ? request->status : st;
      break;
    }
  }
  stats_.wait_seconds += std::chrono::duration<double>(SteadyClock::now() - start).count();
  return result;
}

void RequestChannel::AwaitParts(RequestState* request, int timeout_ms) {
  // Only the shards' sockets, and none of the liveness checks Progress
  // makes: they would end the wait at once with the shard that went.
  const auto start = SteadyClock::now();
  const int num_data = static_cast<int>(sockets_.size());
  while (request->remaining > 0) {
    const int64_t left_ms = timeout_ms - MillisecondsSince(start);
    if (left_ms <= 0) return;
    int n = 0;
    try {
      n = zmq::poll(poll_items_.data(), static_cast<size_t>(num_data),
                    std::chrono::milliseconds(std::min<int64_t>(left_ms, kStopPollMs)));
    } catch (const zmq::error_t&) {
      return;  // a signal: the caller's own checks follow
    }
    for (int s = 0; n > 0 && s < num_data; ++s)
      if (poll_items_[s].revents & ZMQ_POLLIN) (void)DrainReplies(s);
  }
}

Status RequestChannel::WaitAll() {
  while (in_flight_ > 0) TETHER_RETURN_IF_ERROR(Progress(options_.request_timeout_ms));
  return sticky_error_;
}

Status RequestChannel::Idle(int ms) {
  const auto until = SteadyClock::now() + std::chrono::milliseconds(ms);
  while (true) {
    // Rounded up: truncated, the first 1 ms wait would already read as 0 ms
    // left, and Idle(1) (a worker's heartbeat between buffers of data it
    // reads) would return without sending a heartbeat.
    const int64_t left = std::chrono::ceil<std::chrono::milliseconds>(until - SteadyClock::now()).count();
    if (left <= 0) return sticky_error_;
    Status st = Progress(static_cast<int>(std::min<int64_t>(left, options_.heartbeat_interval_ms)));
    if (!st.ok() && st.code() != Status::Code::kDeadlineExceeded) return st;
  }
}

}  // namespace tether
