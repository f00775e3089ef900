// Rendezvous: servers publish the endpoint they bound, workers find every
// shard's endpoint without a list given in advance (docs/DEPLOY.md).
//
// A SPEC names the backend:
//   "file:DIR" or a plain path   a directory on a filesystem every host sees
//                                (NFS, Lustre; or a local one for one host):
//                                one file per entry, DIR/JOB/GEN/server-S,
//                                written atomically (core/file_util.h);
//   "tcp://HOST:PORT"            a store served by one process
//                                (`tether-rendezvous --listen=...`, or a
//                                tether-server/tether-launch given
//                                --rendezvous_serve), reached over ZeroMQ
//                                with the RendezvousRequest/Reply messages
//                                (proto/rendezvous.proto); IPv6 "tcp://[ADDR]:PORT".
// (This is the c10d/torchrun convention: a shared file or a TCP store.)
//
// Entries are keyed by (job id, generation, name), so a restarted or
// requeued job (the next generation) never reads an endpoint of the previous
// one. A server removes its entry when it exits cleanly; one that crashed
// leaves it, so rerunning a job under the same job id AND generation can
// read a dead endpoint: give each run its own job id or generation (the
// launchers do). A worker reads the entry of a shard it waits for again
// (core/net/server_lookup.h), so a server of this run that replaces the dead
// entry later is still found.
//
// Authentication: every store socket is made through BindRouter /
// ConnectDealer with the SocketOptions given to Open / RendezvousStore::Start,
// so the transport's security options (CURVE keys) apply to the store as to
// the servers, and only key holders can publish. The file backend trusts
// whoever can write DIR (use the directory's permissions).
//
// Thread-safety: a Rendezvous is used by one thread at a time. A
// RendezvousStore serves from its own thread; Start/Stop from one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "core/net/listener_guard.h"
#include "core/net/transport.h"
#include "core/net/zap_handler.h"
#include "core/status.h"

namespace tether {

/// An entry's key ("JOB/GEN/NAME", escaped) and value are at most these
/// many bytes (a longer job id is refused when the config is read).
inline constexpr size_t kRendezvousKeyBytes = 1024;
inline constexpr size_t kRendezvousValueBytes = 4096;

/// One entry's place: job id (any string; escaped where it becomes a path),
/// generation, and the entry's name within them ("server-0").
struct RendezvousKey {
  std::string job_id;
  uint64_t generation = 0;
  std::string name;

  /// "JOB/GEN/NAME", the job id percent-escaped outside [A-Za-z0-9._-] so
  /// that it is one path component (and never "." or "..").
  std::string ToString() const;
};

/// The entry name of server shard `shard`: "server-<shard>".
std::string ServerEntryName(int shard);

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;

  /// Opens the backend `spec` names (see the file comment). Nothing is
  /// contacted yet: a store that is not up is waited for by the calls below.
  /// `socket_options`: for the store's DEALER socket (security). Errors:
  /// InvalidArgument for an empty or malformed spec, naming it.
  static StatusOr<std::unique_ptr<Rendezvous>> Open(const std::string& spec,
                                                    const SocketOptions& socket_options = SocketOptions{});

  /// Stores `value` under `key`, replacing any earlier value; returns once
  /// the entry is durable (the file renamed into place, or the store
  /// answered). Waits at most `timeout_ms` for a store that is not up yet.
  /// Errors: IOError (directory not writable), DeadlineExceeded (no store
  /// answered), each naming the spec and key.
  virtual Status Set(const RendezvousKey& key, const std::string& value, int timeout_ms) = 0;

  /// Removes `key` (absent is fine), waiting at most `timeout_ms`.
  /// Errors: as Set.
  virtual Status Delete(const RendezvousKey& key, int timeout_ms) = 0;

  /// Waits until every key of `keys` holds a value or `timeout_ms` passed,
  /// polling (file backend: every 20 ms at first, backing off to 250 ms) or
  /// with requests the store holds until the value arrives; `stop` (may be
  /// empty) is asked about every 100 ms at most and ends the wait with
  /// Unavailable ("stopped"). Returns the values in the order of `keys`.
  /// Errors: DeadlineExceeded naming the keys still missing and the spec;
  /// IOError (an unreadable file); Unavailable when `stop` said so.
  virtual StatusOr<std::vector<std::string>> WaitAll(const std::vector<RendezvousKey>& keys, int timeout_ms,
                                                     const std::function<bool()>& stop) = 0;

  const std::string& spec() const { return spec_; }

 protected:
  explicit Rendezvous(std::string spec) : spec_(std::move(spec)) {}
  std::string spec_;
};

/// Publishes server shard `shard`'s endpoint for (job_id, generation), and
/// beside it who holds the entry ("server-S.owner": pid, host, `start_id`,
/// endpoint, time). An entry that already names another endpoint is
/// replaced only when no process answers there within 2 s
/// (EndpointAnswers: the process that published it crashed), with a
/// warning; while one does, nothing is written. An entry naming
/// `superseded` (non-empty: the primary whose shard a copy claimed, which
/// steps down even if it answers now) is replaced without the probe.
/// Errors: FailedPrecondition "rendezvous SPEC: entry JOB/GEN/server-S is
/// already held by a live process (pid P on host H, ..., at ENDPOINT, since
/// T): this server ... does not replace it; ..."; as Rendezvous::Set.
Status PublishServer(Rendezvous* rdzv, const std::string& job_id, uint64_t generation, int shard,
                     const std::string& endpoint, int timeout_ms, const std::string& start_id = "",
                     const std::string& superseded = "");

/// Waits for the endpoint of shard `shard` alone of (job_id, generation).
/// Errors: as LookupServers for that one shard.
StatusOr<std::string> LookupServer(Rendezvous* rdzv, const std::string& job_id, uint64_t generation, int shard,
                                   int timeout_ms, const std::function<bool()>& stop);

/// Waits for the endpoints of shards 0 .. num_servers-1 of (job_id,
/// generation), in shard order. Each must be a tcp:// or ipc:// endpoint.
/// Errors: DeadlineExceeded naming the missing shards, the job and the spec;
/// DataLoss for an entry that is not an endpoint; as Rendezvous::WaitAll.
StatusOr<std::vector<std::string>> LookupServers(Rendezvous* rdzv, const std::string& job_id, uint64_t generation,
                                                 int num_servers, int timeout_ms,
                                                 const std::function<bool()>& stop);

/// The store a "tcp://HOST:PORT" rendezvous spec points at: a key→value map
/// in memory, served by a thread on a ROUTER socket (BindRouter with the
/// given SocketOptions). GETs for missing keys are held until the key is
/// set or their wait_ms passes (then answered found=false). Lost with the
/// process: it only ever holds the endpoints of live jobs.
/// Bounds (a request past one gets an error reply naming it, and counts in
/// tether_peers_dropped_total{listener="rendezvous"}): a request is one frame
/// of at most kListenerFrameBytes (16 KiB); a key of at most
/// kRendezvousKeyBytes and a value of at most kRendezvousValueBytes; 65,536
/// entries and 64 MiB of them; 65,536 GETs held, 1,024 per connection;
/// 1,024 connections (ListenerGuard), each handshake within 5 s.
class RendezvousStore {
 public:
  RendezvousStore() = default;
  ~RendezvousStore() { Stop(); }
  RendezvousStore(const RendezvousStore&) = delete;
  RendezvousStore& operator=(const RendezvousStore&) = delete;

  /// Binds `listen` ("tcp://HOST:PORT"; "file:" specs have no store) and
  /// starts serving. With socket_options.curve set (security.curve; see
  /// RendezvousCurveServer in core/net/curve.h) the store is a CURVE server
  /// that admits only the public keys in `admitted_keys` (Z85), through a
  /// ZAP handler of its own context started before the bind: a process
  /// without a listed key can neither read nor write an entry, so a
  /// poisoned entry cannot redirect workers. Without CURVE, a bind beyond
  /// loopback logs the "anyone who can reach" warning.
  /// Errors: InvalidArgument for a spec that is not tcp://; IOError from
  /// the bind (port taken), naming the endpoint; those of ZapHandler::Start.
  Status Start(const std::string& listen, const SocketOptions& socket_options = SocketOptions{},
               const std::vector<std::string>& admitted_keys = {});
  /// Stops the thread (within 100 ms) and closes the socket. Idempotent.
  void Stop();
  /// The endpoint bound (the real port for port 0), after Start.
  const std::string& endpoint() const { return endpoint_; }
  /// Requests served so far (every op), for tests and logs.
  uint64_t requests() const { return requests_.load(); }

 private:
  void Serve();

  zmq::context_t ctx_;
  std::unique_ptr<ZapHandler> zap_;  // in ctx_; destroyed before it
  std::unique_ptr<ListenerGuard> guard_;  // the connection caps; in ctx_
  zmq::socket_t socket_;
  std::string endpoint_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> requests_{0};
};

}  // namespace tether
