// RequestChannel: a worker's request layer to every server shard: one ZeroMQ
// DEALER socket per shard, request ids, the in-flight window per shard
// (back-pressure), heartbeats, the progress loop that receives replies and
// hands each to its owner, and the RequestHandle of every user call (the
// manner of PyTorch c10d's Work: is_completed(), Wait(timeout), status()).
//
// It knows nothing about tables, keys or the SSP cache: WorkerClient
// (worker/client/client.h) builds the messages, keeps per message what it needs to
// use the reply (a `tag`), and composes this channel with the cache
// (worker/client/param_cache.h).
//
// Requests and handles. A user call (one PullRows, one PushDense, one
// Barrier) is one request: NewRequest() makes its handle, and each message of
// it sent with Send() counts as one part owed a reply. The request completes
// when every part is answered or failed; its status is its first failure, and
// nothing else: no call can observe another request's outcome. A request
// marked `sticky` (pushes) also records its first failure as the worker's
// sticky error, which every later Clock, Barrier, Bye, Idle and WaitAll
// returns, so a lost push can never end in exit 0 even when nobody waits on
// its handle (fire-and-forget, as the models push). Messages that expect no
// reply (CLOCK, HEARTBEAT) have no request; their send failures are sticky.
//
// Memory: a request's state is allocated once and recycled: once no handle
// refers to it and every part is answered it goes back to a free list, so a
// warm worker allocates no request state per minibatch. Likewise the record
// of a message in flight is a recycled slot; its index is part of the request
// id, so a reply finds its record without a hash table. Requests in flight
// are bounded by the window: max_outstanding per shard (see Send).
//
// Liveness (case "a dead server", docs/OPERATIONS.md). Over tcp:// and
// ipc:// each DEALER socket sends ZMTP heartbeats and is watched by a socket
// monitor whose events (ZMTP handshake done, disconnected) are read in the
// channel's own wait loop. A shard whose connection went down and has not come back
// within liveness_timeout_ms is gone: every later wait fails with
// Unavailable naming the shard index and endpoint, also a wait on other
// shards' replies, and so does the sticky error. A server whose event loop
// is merely busy (a long checkpoint write) keeps its connection and its
// heartbeats answered, so it is waited for (request_timeout_ms) and never
// given up. inproc:// endpoints have no connection to lose and keep
// request_timeout_ms only.
//
// A server restarted on its address (killed and started again by hand) is
// a new process that holds none of the job's tables and knows no worker.
// Each server process draws a start id that it stamps on every message it
// sends (MessageHeader.server_incarnation); the channel keeps each shard's
// first and checks every message against it. Another id makes the shard
// gone, with the message "server shard N at ADDR restarted (new process)
// and holds none of the job's tables; resume the job from a checkpoint
// ...", and the message is dropped, so no request fails with the new
// process's confusion ("unknown table id 0"). A shard whose connection
// comes back gets a heartbeat at once: a new process answers it (a
// HEARTBEAT from a worker that never said HELLO to it is an error), so an
// idle worker learns it within one round trip. ABORT carries the id the
// worker knew, so that the new process ends as well. The wait loop wakes at least every
// kStopPollMs to look at `abort`, `stop_requested` and the shards' liveness,
// and a signal interrupting its poll (EINTR) is no error.
//
// Waiting out loud: while monitored shards have never connected, a wait logs
// "waiting for server shard N at ADDR (no connection yet; T s of
// cluster.startup_timeout_ms=L)" 3 s after Connect() and every 10 s after;
// once every shard is reached, a wait that gets no reply for 5 s logs which
// shards it waits on and its limit, every 10 s (core/wait_report.h). A peer
// that accepts the connection and does not complete the ZMTP greeting
// within kServerHandshakeTimeoutMs (5 s) before it ever did is
// gone at once: "the peer does not speak ZMTP (not a Tether server? check
// --server_addresses)"; one that closes the connection in the greeting,
// after kKnownBadHandshakes of them.
//
// A shard that moved (Options::server_lookup, the servers found in a
// rendezvous): while a monitored shard has never connected or is down, each
// wake-up of a wait asks the ServerLookup (core/net/server_lookup.h), which
// re-reads the shard's entry every 500 ms at most (one read per wake-up,
// the waiting shards taking turns); when the entry names
// another endpoint (a stale entry replaced by the real server, or a server
// started again elsewhere), the shard's socket is moved there, with one
// WARNING naming both endpoints, and the requests sent to a shard that
// never connected (HELLO) are sent again there. What answers at the new
// endpoint is judged as at the old one: cluster.startup_timeout_ms still
// counts from Connect(), and a new process on a shard that had answered is
// refused (the start id check above).
//
// A replicated shard (cluster.replicas > 0, replication/chain_view.h): its
// HELLO_REPLY names the serving endpoints of its replicas, next in the
// chain first (SetChain). Every message sent to it but a HEARTBEAT is kept
// (worker/client/resend_window.h) until a reply to it or to a later request
// arrives: the server holds each reply until the shard's replicas have
// every input before it; kept while no successor is known too (the chain
// ran out), so that a replica that joins the new primary later gets again
// what that primary leaves unanswered. When the shard's connection goes down (its process
// died; a silent one after the ZMTP heartbeat timeout), the socket moves at
// once to the next endpoint left, with one WARNING naming the shard and
// both endpoints, and every kept message is sent there again, in the
// original order and byte-identical (same request ids, same identity). A
// successor that refuses the connection (no process listens there: it died
// too, with the primary) is passed over for the endpoint after it, the kept
// messages sent there; one that accepts it and does not answer (a stopped
// process) is waited for up to liveness_timeout_ms from the primary's
// disconnect, as is the last one. The
// replica that claims the shard has replayed this worker's HELLO and the
// shard's log, and answers each message once. Messages carry the shard's
// chain generation (MessageHeader.shard_generation); the channel keeps the
// highest: another server start id is accepted only with a higher
// generation (the process that claimed the shard), a message with a lower
// one (from a former primary) is dropped, and a second reply to a request
// already answered (one sent again) is dropped quietly. With no endpoint
// left, or while leaving, the shard is judged as an unreplicated one, but
// with Options::claim_lookup (the job has a rendezvous): while the last
// endpoint followed does not answer, or once the connection to the last one
// known went down, each wake-up of a wait reads the shard's
// rendezvous entry (worker/client/claim_lookup.h, every 100 ms at most);
// an entry naming an endpoint this worker has not been at is the process
// that claimed the shard since (a copy that joined the claim again as a
// learner, on a port the worker never heard of, and claimed when the
// claimant died too): the socket moves there, with one WARNING naming both
// endpoints, and the kept messages are sent there again as when following
// the chain. The shard is still given up liveness_timeout_ms after the
// primary's disconnect.
// Following needs the connection watched: liveness_timeout_ms > 0 or CURVE,
// over tcp:// or ipc://. A connection dropped by a primary that is alive
// (this process stalled past the liveness timeout) is followed too; unless
// the successor then claims the shard, the wait ends at request_timeout_ms.
//
// Ownership and thread-safety: not thread-safe. The channel, its handles and
// the reply handler are used on one thread (the worker's). A handle may
// outlive the channel: it then keeps the outcome it had; a request that was
// still in flight when the channel was destroyed reports Unavailable
// ("abandoned"). The ZeroMQ context is the channel's own or the caller's
// (Options::context, which must outlive the channel).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "core/net/frame_pool.h"
#include "worker/client/wire_bytes.h"
#include "core/stall_watch.h"
#include "core/wait_report.h"
#include "core/net/message.h"
#include "core/net/reply_joiner.h"
#include "core/net/server_lookup.h"
#include "core/net/transport.h"
#include "core/status.h"
#include "worker/client/claim_lookup.h"
#include "worker/client/resend_window.h"
#include "worker/client/slot_pool.h"

namespace tether {

/// How long a worker's connection to a server may take to complete its ZMTP
/// greeting (ZMQ_HANDSHAKE_IVL, SocketOptions::connect_handshake_timeout_ms)
/// before the peer is taken for one that does not speak ZMTP, in ms.
inline constexpr int kServerHandshakeTimeoutMs = 5000;

class RequestChannel;
struct RequestState;

/// The handle of one asynchronous request (c10d's Work). Cheap to copy (a
/// pointer and a reference count, no allocation). An empty handle
/// (default-constructed) is completed, and its status is FailedPrecondition.
/// Not thread-safe: use it on the thread of the channel that made it.
class RequestHandle {
 public:
  RequestHandle() = default;
  RequestHandle(const RequestHandle& other);
  RequestHandle(RequestHandle&& other) noexcept;
  RequestHandle& operator=(RequestHandle other) noexcept;
  ~RequestHandle();

  /// True for a default-constructed handle (no request).
  bool empty() const { return state_ == nullptr; }
  /// True once every part of the request is answered or failed. Does not
  /// block: it first takes the replies that have already arrived.
  bool is_completed() const;
  /// Blocks until the request completed (at most the channel's
  /// request_timeout_ms without a reply) and returns its own status: the
  /// server's ERROR_REPLY text (FailedPrecondition), DataLoss for a reply that
  /// does not fit the request, or the send's error. Waiting again returns the
  /// same status. While waiting it returns DeadlineExceeded naming the silent
  /// shard(s), IOError/DataLoss for a socket failure, or Unavailable when the
  /// job was aborted; the request then stays outstanding.
  Status Wait() const;
  /// Like Wait() but gives up after `timeout_ms` (≥ 0) with
  /// DeadlineExceeded, leaving the request outstanding.
  Status Wait(int timeout_ms) const;
  /// Like Wait() but returns a part's error as soon as it is answered, not
  /// waiting for the other parts (which stay outstanding): a HELLO refused
  /// by one shard is reported while another shard may never answer.
  Status WaitFirstError() const;
  /// After a wait that failed (a shard gone, say): takes the replies of the
  /// shards still connected for at most `timeout_ms` (≥ 0), until every
  /// other part is answered, whatever made the wait fail; the answers reach
  /// the channel's reply function as usual. A worker's HELLO uses it: a
  /// shard that went may have ended because another refused, and that
  /// refusal says why the job cannot run.
  void AwaitOtherParts(int timeout_ms) const;
  /// The request's outcome once completed (see Wait); before that,
  /// Unavailable ("in flight"). Does not take replies.
  Status status() const;

 private:
  friend class RequestChannel;
  explicit RequestHandle(RequestState* state);
  RequestState* state_ = nullptr;
};

/// Waits for every handle in turn and returns the first error (every handle
/// is waited on even after an error, so none is left half-read).
Status WaitAllOf(std::initializer_list<RequestHandle> handles);
Status WaitAllOf(const std::vector<RequestHandle>& handles);

class RequestChannel {
 public:
  using SteadyClock = std::chrono::steady_clock;

  struct Options {
    int rank = 0;
    std::vector<std::string> servers;  // endpoint per shard, in shard order
    int heartbeat_interval_ms = 1000;  // heartbeat while blocked longer than this
    int request_timeout_ms = 120000;   // a wait fails after this long with no reply
    int max_outstanding = 64;          // requests in flight per shard (≤ the HWMs, see Send)
    int send_hwm = 1000;               // ZeroMQ high-water marks, in messages
    int recv_hwm = 1000;
    zmq::context_t* context = nullptr;  // null: the channel's own
    const std::atomic<bool>* abort = nullptr;  // set by another thread: waits give up
    uint64_t frame_pool_idle_bytes = kDefaultFramePoolIdleBytes;
    /// A shard whose connection has been down this long is gone (see the
    /// file comment); 0: off. Heartbeats go every liveness/4 and time out
    /// after liveness/2 of silence. tcp:// and ipc:// endpoints only.
    int liveness_timeout_ms = 0;
    /// A monitored shard (see `liveness_timeout_ms`) that has never completed
    /// a ZMTP handshake this long after Connect() is gone: every wait fails
    /// with Unavailable naming it, and `servers_source` when set (a stale
    /// rendezvous entry points at a port nobody serves). 0: off.
    int first_connect_timeout_ms = 0;
    std::string servers_source;
    /// Re-reads the entries of shards that have never connected or are down,
    /// and names those that moved (see the file comment); null: off (the
    /// servers were given, not looked up). Used on the channel's thread
    /// only: one lookup per channel.
    std::shared_ptr<ServerLookup> server_lookup;
    /// Reads the rendezvous entry of a replicated shard whose chain ran out
    /// while it was followed, and follows the process that claimed it (see
    /// the file comment); null: off (no rendezvous). Used on the channel's
    /// thread only: one per channel.
    std::shared_ptr<ClaimLookup> claim_lookup;
    /// CURVE keys for tcp:// and ipc:// endpoints (core/net/transport.h);
    /// empty: plain. With them, every such shard is watched by a socket
    /// monitor (also with liveness off), and a handshake the server refuses
    /// makes every wait fail with FailedPrecondition naming the shard and
    /// why: at once for an unlisted key or CURVE on one side only, after
    /// kKnownBadHandshakes failures in a row for one without detail (another
    /// server key). Without CURVE the same events are watched when liveness
    /// is on (a plain worker meeting a CURVE server).
    CurveOptions curve;
    /// Polled every kStopPollMs while waiting; when it returns true every
    /// wait gives up with Unavailable ("stop requested") until Leave or
    /// Abort. May be empty. Called on the channel's thread.
    std::function<bool()> stop_requested;
    /// A reply's 16-bit values are widened to float32 before the handler
    /// sees them (true, the default). False: a PULL_REPLY reaches the
    /// handler in its wire encoding (header.value_encoding()), for a handler
    /// that widens it straight into its destination (ReadValuesInto,
    /// core/net/value_frames.h); every other reply is still widened.
    bool widen_pull_replies = true;
  };

  /// How often a wait looks at abort, stop_requested and liveness, at most.
  static constexpr int kStopPollMs = 100;

  /// Counters since construction.
  struct Stats {
    uint64_t bytes_sent = 0, bytes_received = 0;  // keys + values frames
    uint64_t bytes_placed = 0;  // of bytes_received: values placed by the ValuesPlacer
    WireBytes wire;            // the same, per table and direction (pulls and pushes)
    uint64_t send_waits = 0;   // sends that waited for room in the window
    double wait_seconds = 0;   // time blocked in RequestHandle::Wait
    uint64_t failovers = 0;    // replicated shards followed to the next endpoint of their chain
  };

  /// Called once per reply, in Progress, with the `tag` given to Send and
  /// the channel's verdict: FailedPrecondition carrying an ERROR_REPLY's
  /// text, DataLoss when the reply's type is not the one expected, else OK.
  /// Returns the part's status (the verdict, or an error of its own, e.g. a
  /// reply of the wrong size). The reply's frames may be taken.
  using ReplyHandler = std::function<Status(uint64_t tag, const Status& verdict, Message* reply)>;

  /// Where a chunked float32 PULL_REPLY's values go (ReplyJoiner::Placer),
  /// given the `tag` Send was given for the request it answers and the
  /// reply's header: the address of `bytes` writable bytes, or null to have
  /// them joined as any other reply's. Asked only for a reply to a pull in
  /// flight to that shard's current process; the reply then reaches the
  /// ReplyHandler with its values already there and `values` empty
  /// (Message::placed_values_bytes). Called on the channel's thread.
  using ValuesPlacer = std::function<char*(uint64_t tag, const MessageHeader& header, uint64_t bytes)>;

  /// Sockets are connected by Connect(). `on_reply` must outlive the channel.
  RequestChannel(const Options& options, ReplyHandler on_reply);
  /// Sets the ValuesPlacer; before Connect (no placer: every reply joined).
  void set_values_placer(ValuesPlacer placer) { values_placer_ = std::move(placer); }
  /// Closes the sockets (linger as set by core/net/transport.h). Requests
  /// still in flight are abandoned: their handles report Unavailable.
  ~RequestChannel();
  RequestChannel(const RequestChannel&) = delete;
  RequestChannel& operator=(const RequestChannel&) = delete;

  /// Connects one DEALER socket per shard, all with one fresh identity (so a
  /// restarted worker never collides with its dead predecessor's routing
  /// entry). Errors: InvalidArgument naming a malformed endpoint.
  Status Connect();

  /// A new request; `sticky`: its failures are also the worker's sticky
  /// error. The handle is complete until a part is sent.
  RequestHandle NewRequest(bool sticky);

  /// Sends `m` to `shard`, stamped with a request id, the rank and clock().
  /// With `request` non-null the message is one part of it, owed a reply of
  /// type `expect`, and `tag` comes back with the reply (ReplyHandler);
  /// with null, no reply is expected (CLOCK). Blocks while `shard` has
  /// min(max_outstanding, send_hwm, recv_hwm) requests in flight: the replies
  /// owed then always fit the receive queue, so the shard never blocks
  /// sending to this worker and back-pressure never deadlocks or drops (case
  /// C13). Errors (also recorded on the request, or as sticky without one):
  /// those of Progress while waiting for room, Unavailable/IOError from the
  /// socket. On error the frames of `m` are left in place.
  /// `stamp_clock` ≥ 0 is stamped instead of clock(): a pull read ahead for
  /// a later clock (WorkerClient::PrefetchRows) is answered under that
  /// clock's staleness bound.
  Status Send(int shard, Message* m, const RequestHandle* request, MessageType expect, uint64_t tag,
              int64_t stamp_clock = -1);

  /// From inside the ReplyHandler only: sends `m` as one more part of the
  /// request whose reply is being handled (a request sent again in another
  /// form, e.g. with the keys of a key list the shard did not hold), owed a
  /// reply of type `expect` with `tag`. The part being answered has just
  /// freed its place in `shard`'s window, so a send to the same shard does
  /// not wait. Errors: as Send (also recorded on the request);
  /// FailedPrecondition outside a ReplyHandler. `stamp_clock` as Send's.
  Status SendFromReply(int shard, Message* m, MessageType expect, uint64_t tag, int64_t stamp_clock = -1);

  /// Makes `shard` a replicated one (HELLO_REPLY.chain_endpoints, see the
  /// file comment): `endpoints` are the serving endpoints of its replicas,
  /// next in the chain first, followed when the shard's connection goes
  /// down. From now on every message sent to `shard` but a HEARTBEAT is
  /// kept until a reply acknowledges it. Empty `endpoints`: nothing changes.
  /// Errors: InvalidArgument naming an endpoint that is not tcp:// or
  /// ipc:// (nothing changes then).
  Status SetChain(int shard, const std::vector<std::string>& endpoints);
  /// A reply's MessageHeader.chain_endpoints (a replica joined `shard`):
  /// the chain to follow from now on (SetChain); a bad endpoint is logged
  /// and the chain kept as it was.
  void FollowNewChain(int shard, const MessageHeader& h);

  /// Records `error` on `request` (its first error wins) and, when the
  /// request is sticky, as the sticky error.
  void Fail(const RequestHandle& request, const Status& error);

  /// Receives and dispatches what arrives within `timeout_ms`, sending
  /// heartbeats every heartbeat_interval_ms meanwhile. Errors:
  /// DeadlineExceeded naming the shards owing replies when nothing arrived,
  /// Unavailable when aborted, IOError (poll), DataLoss (a malformed reply).
  Status Progress(int timeout_ms);
  /// Waits (request_timeout_ms at most per reply) until nothing is in flight,
  /// then returns the sticky error. Errors: those of Progress.
  Status WaitAll();
  /// Sleeps `ms` milliseconds while answering heartbeats and taking replies
  /// (a simulated straggler). Returns the sticky error; errors of Progress
  /// other than DeadlineExceeded.
  Status Idle(int ms);

  /// Getting ready to leave (a stop request, or a failure): from now on a
  /// stop request no longer cuts waits short, sends skip the in-flight
  /// window and give up after `bound_ms` on a full queue, and closing the
  /// channel waits up to `bound_ms` for what is queued to reachable shards
  /// (ZMQ_LINGER), 0 for shards that are down. Messages that follow are
  /// best effort: BYE (JobSession::Leave) or ABORT (SendAbort).
  void BeginLeaving(int bound_ms);
  /// Sends ABORT carrying `why` to every shard whose connection is up, best
  /// effort: no reply is awaited; BeginLeaving's linger bounds the flush
  /// when the channel is closed. Returns the number of shards sent to.
  /// `job_id`/`generation` identify the job, so that a shard accepts the
  /// ABORT of a worker it refused at HELLO only when it is of this job.
  /// `skip`: shards not to send to (those that refused this worker's HELLO:
  /// they know why), by shard index; may be empty.
  int SendAbort(const std::string& why, int bound_ms, const std::string& job_id = "", uint64_t generation = 0,
                const std::vector<bool>& skip = {});
  /// False once `shard`'s connection is known to be down (disconnected and
  /// not back, or gone); true for unmonitored (inproc) shards.
  bool shard_up(int shard) const;
  /// True once a shard said it removed this worker (REMOVED: silent past
  /// cluster.worker_timeout_ms); every wait then fails with its reason.
  bool removed() const { return !removed_.ok(); }
  /// The first shard that said it was told to stop (a reply, or an unasked
  /// HEARTBEAT, with server_stopping set: tether-server's stop signal), or
  /// −1. The worker then stops as on its own stop signal.
  int stopping_shard() const { return stopping_shard_; }

  /// The first failure of a sticky request or of a reply-less send.
  const Status& sticky_error() const { return sticky_error_; }
  /// The worker's SSP clock stamped on every message (completed clocks).
  int64_t clock() const { return clock_; }
  void set_clock(int64_t clock) { clock_ = clock; }

  int num_shards() const { return static_cast<int>(sockets_.size()); }
  const std::string& server(int shard) const { return options_.servers[shard]; }
  const std::string& log_prefix() const { return log_prefix_; }
  /// Requests in flight (sent, not yet answered), over all shards.
  size_t in_flight() const { return in_flight_; }
  const Stats& stats() const { return stats_; }
  /// Pool of outgoing large keys/values frames (the caller builds them here).
  FramePool& frame_pool() { return frame_pool_; }
  const FramePool& frame_pool() const { return frame_pool_; }

 private:
  friend class RequestHandle;
  // One message in flight: slot `id & 0xffffffff` of pending_.
  struct Pending {
    uint64_t id = 0;  // 0: free
    RequestState* request = nullptr;
    int shard = 0;
    MessageType expect = MSG_UNKNOWN;
    uint64_t tag = 0;
  };

  // The connection to one shard, as its socket monitor reports it.
  struct Link {
    bool monitored = false;       // tcp:// or ipc:// with liveness or CURVE on
    bool ever_connected = false;  // a handshake event or a reply came
    bool connected = false;
    SteadyClock::time_point down_since;  // valid while ever_connected && !connected
    int failed_handshakes = 0;    // in a row, since the last one that succeeded
    // The server process's start id (MessageHeader.server_incarnation) from
    // its first message; 0 until one came. Kept for every shard, watched
    // or not.
    uint64_t incarnation = 0;
    // A replicated shard (SetChain): the endpoints left to follow, next
    // first; the highest chain generation seen (0: none); whether a message
    // of an older one was logged; whether the socket moved to a successor
    // that has not completed a handshake yet; what was sent and not
    // acknowledged.
    bool replicated = false;
    std::deque<std::string> successors;
    uint64_t generation = 0;
    bool stale_logged = false;
    bool following = false;
    ResendWindow unacked;
    // Connects to the endpoint followed that were refused in a row (no
    // process listens there; see kRefusedConnectsForDead).
    int refused_connects = 0;
    // The connection went down with no successor known: the worker looks
    // for a claimant in the rendezvous, and counts the failover once it
    // follows one (FollowClaims).
    bool failover_uncounted = false;
  };
  // Handshakes failing without detail this many times in a row end the
  // shard (see TakeMonitorEvents).
  static constexpr int kKnownBadHandshakes = 3;
  SteadyClock::time_point connect_time_;  // set by Connect()

  // `first_error`: return as soon as a part failed (WaitFirstError); a wait
  // that fails (a shard gone) after a part's own error then returns that
  // error: the answer says more than the lost connection.
  Status WaitFor(RequestState* request, int timeout_ms, bool first_error = false);
  // Abort, stop and liveness verdicts, checked at every wake-up of a wait.
  Status CheckInterrupts();
  Status CheckLiveness();
  // Logs, at the pace of WaitReport (core/wait_report.h), the shards that
  // never connected and, once every one has, the shards whose requests go
  // unanswered: a long wait names what it waits for and its limit.
  void ReportWaits();
  // Why the handshake with `shard` failed (a monitor event and its value).
  std::string HandshakeFailure(int shard, int event, uint32_t value) const;
  // Whether a monitor event says the handshake timed out: the peer accepted
  // the connection and never completed the ZMTP greeting.
  static bool GreetingTimedOut(int event, uint32_t value);
  // Receives and dispatches every reply already queued on shard's socket
  // (without waiting). Errors: DataLoss (a malformed reply).
  Status DrainReplies(int shard);
  // RequestHandle::AwaitOtherParts.
  void AwaitParts(RequestState* request, int timeout_ms);
  // False (and gone_ set, naming the shard) when `incarnation` (a message's
  // server_incarnation, 0: none) is not the one `shard` sent first: a new
  // process answers on its address. The message is then dropped.
  bool SameServerProcess(int shard, uint64_t incarnation);
  // False (the message is dropped) when `h` carries a lower chain generation
  // than `shard` has seen; a higher one is kept, with its server start id.
  bool CurrentGeneration(int shard, const MessageHeader& h);
  // A replicated shard's reply `h`: acknowledges what was kept up to its
  // request id; false for a second reply to a request already answered.
  bool Acknowledge(int shard, const MessageHeader& h);
  // Whether request id `id` is owed a reply.
  bool InFlight(uint64_t id) const;
  // The joiner of `shard`'s replies, connected to `endpoint`.
  ReplyJoiner NewJoiner(int shard, const std::string& endpoint);
  // values_placer_'s answer for a chunked pull reply from `shard` that
  // Dispatch will hand on (in flight, of the shard's current process and
  // chain generation); null for any other.
  char* PlaceValues(int shard, const MessageHeader& h, uint64_t bytes);
  // Whether `shard`, whose connection just went down, moves to its next
  // chain endpoint (see the file comment).
  bool FollowsChain(int shard) const;
  // Moves `shard` to its next chain endpoint and sends again what was kept.
  void FollowChain(int shard);
  // The pop, move and resend of FollowChain (also for a dead successor).
  void MoveAlongChain(int shard);
  // Moves `shard`, which follows its chain, to `next` and sends again what
  // was kept; a failure makes the shard gone.
  void MoveFollowing(int shard, const std::string& next);
  // Asks claim_lookup about each replicated shard whose chain ran out while
  // it was followed, and moves those whose entry names a claimant there.
  void FollowClaims();
  void TakeMonitorEvents(int shard);
  // A connect of `shard`'s socket to `endpoint` was refused (a
  // CONNECT_RETRIED event): while it follows its chain and the endpoint is
  // the one followed, the successor's process is dead after
  // kRefusedConnectsForDead of them, and the chain is followed on.
  void TakeRefusedConnect(int shard, const std::string& endpoint);
  // `shard`'s connection went down (a DISCONNECTED event): follows its
  // chain, or judges what was in flight (LoseInFlight).
  void LinkDown(int shard);
  // `shard`'s connection dropped with requests in flight: gone_ now, or,
  // right after a stall of this process, lost_after_stall_ (see there).
  void LoseInFlight(int shard);
  // Asks server_lookup about each shard waiting for a connection, and
  // moves those whose entry changed (MoveShard). Drops the copies kept for
  // shards that connected.
  void FollowMovedShards();
  // Reconnects `shard`'s socket to `endpoint` and sends again the requests
  // kept in unconnected_sent_; a failure makes the shard gone.
  void MoveShard(int shard, const std::string& endpoint);
  // Reconnects `shard`'s socket to `endpoint` and sends copies of `again`
  // there, in order. Errors: those of the socket (nothing is undone).
  Status MoveSocket(int shard, const std::string& endpoint, std::deque<Message>& again);
  // Whether a request sent to `shard` now is kept for a move.
  bool KeepsCopies(int shard) const;
  void FailState(RequestState* request, const Status& error);
  void Dispatch(Message* reply);
  void PartDone(RequestState* request);  // one part answered or failed
  void Recycle(RequestState* request);
  // A HEARTBEAT to each shard that is up and has had no message from this
  // worker for options_.heartbeat_interval_ms (last_send_).
  void SendHeartbeats();
  int Window() const;

  Options options_;
  ReplyHandler on_reply_;
  std::string log_prefix_;
  std::unique_ptr<zmq::context_t> own_ctx_;  // when options.context is null
  zmq::context_t* ctx_;
  // Outgoing keys and values frames; frames ZeroMQ has not sent yet when the
  // channel goes keep the pool's buffers alive on their own.
  FramePool frame_pool_;
  std::vector<zmq::socket_t> sockets_;
  // Per shard: its large float32 pull replies arrive in chunks (protocol 9),
  // written where values_placer_ says or joined into frames of frame_pool_
  // as they come.
  std::vector<ReplyJoiner> joiners_;
  ValuesPlacer values_placer_;
  bool heap_padded_ = false;  // PadReceiveHeaps was called (a tcp:// or ipc:// shard)
  std::vector<zmq::pollitem_t> poll_items_;
  std::vector<int> outstanding_;  // per shard
  SlotPool<Pending> pending_;
  size_t in_flight_ = 0;
  uint64_t next_sequence_ = 1;
  std::vector<RequestState*> states_;       // every state made (deleted or orphaned at the end)
  std::vector<RequestState*> free_states_;  // no handle, nothing in flight
  Status sticky_error_;
  int64_t clock_ = 0;
  // Per shard: when the last message went to it. A shard that heard
  // nothing for a heartbeat interval gets a HEARTBEAT (SendHeartbeats),
  // even while requests keep going to other shards (a worker polling
  // shard 0 for a chunk must stay alive on every shard).
  std::vector<std::chrono::steady_clock::time_point> last_send_;
  Stats stats_;
  // Liveness: per shard; the monitors' PAIR sockets follow the data sockets
  // in poll_items_ (monitor_shard_[i] is the shard of poll item
  // num_shards() + i).
  std::vector<Link> links_;
  std::vector<zmq::socket_t> monitors_;
  std::vector<int> monitor_shard_;
  // Per shard, with a server_lookup: copies of the requests sent while it
  // had never connected (at most the window), sent again if it moves.
  std::vector<std::deque<Message>> unconnected_sent_;
  int next_lookup_shard_ = 0;  // the shard FollowMovedShards asks first
  Status gone_;          // the first shard found gone: every wait fails with it
  // This process's own stalls (SIGSTOP, a paused VM): a connection that
  // dropped with requests in flight right after one is the stall's doing.
  // The verdict then waits until lost_after_stall_until_ for the shard to
  // say whether it removed this worker (REMOVED), and is lost_after_stall_
  // if it does not (CheckLiveness).
  StallWatch stall_;
  // ReportWaits: the wait for first connections (from Connect) and the wait
  // for a reply (from the last reply taken while requests are in flight).
  WaitReport connect_report_;
  WaitReport reply_report_{WaitReport::Options{5000, 10000}};
  Status lost_after_stall_;
  std::chrono::steady_clock::time_point lost_after_stall_until_{};
  int stopping_shard_ = -1;  // stopping_shard()
  Status removed_;       // a shard's REMOVED (its reason); gone_ and sticky_error_ then
  bool leaving_ = false;  // BeginLeaving was called
  bool said_bye_ = false;  // a BYE was sent: the servers may exit once they answered it
  RequestState* replying_to_ = nullptr;  // the request whose reply the handler is handling (SendFromReply)
};

}  // namespace tether
