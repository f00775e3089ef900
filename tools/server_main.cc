// tether-server: one parameter-server shard.
//
// Exit codes: 0 every worker finished (BYE); 1 the job failed (a worker sent
// ABORT, a worker was removed for silence and never came back, a timeout,
// a bind error); 2 bad config or flags; 5 (--join_as_replica) every shard
// asked has all its replicas (kExitNothingToJoin); 128 + N on stop signal N (130
// SIGINT, 143 SIGTERM): the shard stops within its poll interval (100 ms)
// whatever its workers are doing, since the job did not finish. With
// checkpoint.dir set it first serves its workers, stopped by the same
// signal, while they write their stop checkpoint and say BYE (at most
// --stop_grace_s); a second signal stops it at once. A signal that reaches
// this server alone asks every worker to take that stop checkpoint and
// leave (they exit 143). Workers that finish the job during the grace: 0.
//
// With --metrics_port the shard serves /metrics (cli/metrics_flags.h) and
// keeps serving its final values --metrics_linger_s seconds after Run()
// returns, then exits with the code above (a stop signal during the linger
// ends it at once, without changing the code).
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/config.h"
#include "core/file_util.h"
#include "core/job_inputs.h"
#include "telemetry/metrics_log.h"
#include "core/net/curve.h"
#include "core/net/endpoint_check.h"
#include "core/net/rendezvous.h"
#include "core/net/transport.h"
#include "checkpoint/checkpoint.h"
#include "replication/chain_view.h"
#include "server/replica_host.h"
#include "server/server.h"
#include "server/shard_metrics.h"
#include "cli/config_flags.h"
#include "cli/metrics_flags.h"
#include "cli/signals.h"

DEFINE_int32(shard, 0, "this server's shard index in [0, num_servers) (with --join_as_replica: the shard to copy)");
DEFINE_bool(join_as_replica, false,
            "join a running job (cluster.replicas >= 1) as the replica of a shard with fewer than cluster.replicas "
            "replicas: copy it while training goes on, serve it at --listen if its primary goes");
DEFINE_string(listen, "tcp://127.0.0.1:0",
              "ZeroMQ endpoint to bind; port 0 picks a free port. IPv6 (tcp://[::1]:0), host names "
              "(tcp://myhost:0) and wildcards (tcp://*:0, tcp://0.0.0.0:0: every interface) work");
DEFINE_string(port_file, "",
              "if set, the endpoint peers connect to (the bound one, or for a wildcard bind the advertised "
              "one, see --advertise_host) is written here (atomically) once listening");
DEFINE_string(advertise_host, "",
              "for a wildcard --listen: the host (name or address) workers connect to, written to --port_file "
              "and published to --rendezvous; default: this machine's hostname");
DEFINE_int32(stop_grace_s, 20,
             "on the first SIGTERM/SIGINT, keep serving up to this long while the "
             "workers (stopped by the same signal, as under SLURM's scancel or requeue) write their stop "
             "checkpoint (where the job checkpoints: the workers' checkpoint.dir, whatever this server's) and "
             "say BYE; a second signal stops at once. 0: stop at once. Keep it below the "
             "scheduler's kill wait (SLURM's KillWait, 30 s by default)");
DEFINE_string(resume_from, "",
              "the checkpoint to load rows from, as this host sees it (default: the path worker 0 resumes "
              "from, sent at HELLO)");

// Signed so that a negative value reaches the validator, which names the
// flag and the range, instead of gflags' "illegal value" for a uint64.
DEFINE_int64(key_list_cache_bytes, static_cast<int64_t>(tether::kDefaultKeyListCacheBytes),
             "bytes of key lists this shard keeps, split evenly over the job's workers (key-list caching: a "
             "request that repeats a key list sends its id, not its keys, and is not looked up again; "
             "docs/OPERATIONS.md); 0: off");
static bool ValidKeyListCacheBytes(const char* flag, int64_t value) {
  if (value >= 0) return true;
  std::fprintf(stderr,
               "error: --%s=%lld: must be a number of bytes >= 0 (0 turns key lists off; the default %llu is "
               "64 MiB per shard)\n",
               flag, static_cast<long long>(value), static_cast<unsigned long long>(tether::kDefaultKeyListCacheBytes));
  return false;
}
DEFINE_validator(key_list_cache_bytes, &ValidKeyListCacheBytes);

DEFINE_bool(rendezvous_serve, false,
            "also serve the rendezvous store at the --rendezvous address (tcp://HOST:PORT, HOST one of this "
            "machine's) in this process, for the whole job (docs/DEPLOY.md)");

namespace {
// Set once by the stop signal handler (lock-free atomics are
// async-signal-safe); Run() looks at the shard's stop flag every poll.
std::atomic<int> g_signal{0};
std::atomic<tether::ServerShard*> g_server{nullptr};
// The copies this process holds (one per replica place; a joining process:
// its one), each registered while it runs.
constexpr int kMaxHostedReplicas = 8;  // the most cluster.replicas allows (core/config/validate.cc)
std::atomic<tether::ReplicaHost*> g_replicas[kMaxHostedReplicas] = {};
std::atomic<int64_t> g_stop_grace_ms{0};  // > 0: the first signal lets the workers leave first
void RequestStop(int sig) {
  const bool first = g_signal.exchange(sig) == 0;
  // A shard this process claimed as a replica stops as its own does.
  for (std::atomic<tether::ReplicaHost*>& slot : g_replicas) {
    tether::ReplicaHost* r = slot.load();
    if (r == nullptr) continue;
    if (first)
      r->StopAfterWorkers(std::chrono::milliseconds(g_stop_grace_ms.load()));
    else
      r->Stop();
  }
  tether::ServerShard* s = g_server.load();
  if (s == nullptr) return;
  // The first signal tells the workers (a grace of 0 without checkpoint.dir:
  // they leave without a checkpoint); a second stops the shard at once.
  if (first)
    s->StopAfterWorkers(std::chrono::milliseconds(g_stop_grace_ms.load()));
  else
    s->Stop();
}
// The exit code of a Run() that returned `st` (logs why it is not 0);
// `finished`: every worker finished the job (ServerShard::job_finished).
int ExitCode(const tether::Status& st, bool finished);
}  // namespace

namespace {

bool ShardGiven() {
  gflags::CommandLineFlagInfo info;
  return gflags::GetCommandLineFlagInfo("shard", &info) && !info.is_default;
}

// A process started with --join_as_replica holds no shard of its own: its
// lines name it as what it is, not as the shard --shard defaults to.
std::string Role() {
  if (!FLAGS_join_as_replica) return "server " + std::to_string(FLAGS_shard);
  return ShardGiven() ? "joining replica of shard " + std::to_string(FLAGS_shard) : "joining replica";
}

std::string Who() { return "[" + Role() + "] "; }

// The shard's sockets to the rendezvous store (as its client) and, with
// --rendezvous_serve, the store's own: with security.curve the store,
// served here or elsewhere, is a CURVE server too, and only key holders may
// read or publish (core/net/rendezvous.h).
struct RendezvousSockets {
  tether::SocketOptions client;
  tether::SocketOptions store;
  std::vector<std::string> admitted;  // the keys the store admits
};

tether::Status RendezvousSocketsFor(const tether::JobConfig& config, RendezvousSockets* sockets) {
  const std::string& rendezvous = config.cluster().rendezvous();
  if (!config.security().has_curve() || rendezvous.empty() || rendezvous.rfind("tcp://", 0) != 0)
    return tether::Status::OK();
  auto client = tether::RendezvousCurveClient(config.security().curve(), /*as_server=*/true);
  auto served = tether::RendezvousCurveServer(config.security().curve(), &sockets->admitted);
  if (!client.ok() || !served.ok()) return client.ok() ? served.status() : client.status();
  sockets->client.curve = *client;
  sockets->store.curve = *served;
  return tether::Status::OK();
}

// --rendezvous_serve: the store in this process, for the whole job. The
// exit code when it cannot be served (logged), else 0.
int ServeRendezvous(const std::string& rendezvous, const RendezvousSockets& sockets,
                    std::unique_ptr<tether::RendezvousStore>* store) {
  if (!FLAGS_rendezvous_serve) return 0;
  if (rendezvous.rfind("tcp://", 0) != 0) {
    LOG(ERROR) << Who() << "--rendezvous_serve needs --rendezvous=tcp://HOST:PORT (the store's address), got '"
               << rendezvous << "'";
    return 2;
  }
  *store = std::make_unique<tether::RendezvousStore>();
  if (tether::Status st = (*store)->Start(rendezvous, sockets.store, sockets.admitted); !st.ok()) {
    LOG(ERROR) << Who() << st.message();
    return 1;
  }
  LOG(INFO) << Who() << "serving the rendezvous store at " << (*store)->endpoint();
  return 0;
}

// The files this run reads (--config, --flagfile, the data files its config
// names, the checkpoint of --resume_from), which no output may be.
std::vector<tether::NamedInput> RunInputs(const tether::JobConfig& config) {
  std::string config_path, flagfile;
  gflags::GetCommandLineOption("config", &config_path);
  gflags::GetCommandLineOption("flagfile", &flagfile);
  return tether::JobInputs(config_path, flagfile, config, FLAGS_resume_from);
}

// train.metrics_dir: the shard's clock rows (null without it). Errors:
// MetricsLog::Open's.
tether::StatusOr<std::unique_ptr<tether::MetricsLog>> OpenMetricsLog(const tether::JobConfig& config,
                                                                     tether::ServerShard* server) {
  if (config.train().metrics_dir().empty()) return std::unique_ptr<tether::MetricsLog>();
  TETHER_ASSIGN_OR_RETURN(auto log, tether::MetricsLog::Open(config.train().metrics_dir(), "server", FLAGS_shard, RunInputs(config)));
  tether::LogShardClocks(server, log.get());
  return log;
}

// --metrics_port: /metrics from a copy the shard publishes (null when
// --metrics_port is -1; the flags are still checked).
tether::StatusOr<std::unique_ptr<tether::MetricsEndpoint>> StartEndpoint(
    const tether::JobConfig& config, tether::ServerShard* server,
    tether::PublishedSnapshot<tether::ShardMetricsSnapshot>* published) {
  TETHER_ASSIGN_OR_RETURN(
      auto endpoint, tether::StartMetricsEndpointFromFlags(
                         Who(), {server->job_id(), "server", "shard", FLAGS_shard},
                         [published, job = server->job_id(), shard = FLAGS_shard] {
                           return tether::RenderShardMetrics(published->Get(), job, shard);
                         },
                         RunInputs(config)));
  if (endpoint != nullptr) tether::PublishShardMetrics(server, published);
  return endpoint;
}

// Binds --listen and writes --port_file; *reachable: what peers connect to,
// the bound endpoint or, for a wildcard bind (which names no host a peer
// can reach), the advertised host's.
tether::Status Listen(tether::ServerShard* server, std::string* reachable) {
  TETHER_RETURN_IF_ERROR(server->Bind(FLAGS_listen));
  *reachable = tether::AdvertisedEndpoint(server->endpoint(), FLAGS_advertise_host);
  if (*reachable != server->endpoint())
    LOG(INFO) << Who() << "bound " << server->endpoint() << " (every interface); workers are told to connect to "
              << *reachable
              << (FLAGS_advertise_host.empty() ? " (this machine's hostname; set --advertise_host to change it)"
                                               : " (--advertise_host)");
  if (!FLAGS_port_file.empty()) return tether::WriteFileAtomically(FLAGS_port_file, *reachable + "\n");
  return tether::Status::OK();
}

// The shard's entry in the rendezvous, published once it listens, and
// withdrawn when it stops.
class RendezvousEntry {
 public:
  RendezvousEntry(const tether::JobConfig& config, std::string reachable)
      : config_(config), job_id_(tether::JobId(config)), reachable_(std::move(reachable)) {}

  // Bounded by cluster.startup_timeout_ms (a store not up yet is waited
  // for), in slices so that a stop signal is honoured within one.
  tether::Status Publish(const tether::SocketOptions& socket_options) {
    const std::string& rendezvous = config_.cluster().rendezvous();
    TETHER_ASSIGN_OR_RETURN(rdzv_, tether::Rendezvous::Open(rendezvous, socket_options));
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.cluster().startup_timeout_ms());
    tether::Status st;
    do {
      st = tether::PublishServer(rdzv_.get(), job_id_, generation(), FLAGS_shard, reachable_, 500);
    } while (st.code() == tether::Status::Code::kDeadlineExceeded && g_signal.load() == 0 &&
             std::chrono::steady_clock::now() < give_up);
    if (st.code() == tether::Status::Code::kDeadlineExceeded)
      st = tether::Status::DeadlineExceeded(st.message() + " (gave up after cluster.startup_timeout_ms = " +
                                            std::to_string(config_.cluster().startup_timeout_ms()) + " ms)");
    published_ = st.ok();
    if (st.ok())
      LOG(INFO) << Who() << "published " << reachable_ << " to rendezvous " << rendezvous << " (job '" << job_id_
                << "' generation " << generation() << ")";
    return st;
  }

  // The entry names a port about to close: withdraw it (best effort; a
  // crashed server's stays, see core/net/rendezvous.h). Only an entry this
  // shard published and that still names it: a shard started again
  // meanwhile (same job, generation and shard) has replaced it with its
  // own, which must stay.
  void Withdraw() {
    if (rdzv_ == nullptr || !published_) return;
    const tether::RendezvousKey key{job_id_, generation(), tether::ServerEntryName(FLAGS_shard)};
    auto current = rdzv_->WaitAll({key}, 500, nullptr);
    if (current.ok() && current->size() == 1 && (*current)[0] == reachable_) {
      if (tether::Status del = rdzv_->Delete(key, 1000); !del.ok())
        LOG(WARNING) << Who() << "could not withdraw the rendezvous entry: " << del.message();
    } else if (current.ok() && current->size() == 1) {
      LOG(INFO) << Who() << "the rendezvous entry now names " << (*current)[0]
                << " (another process of this shard): left in place";
    }
  }

 private:
  uint64_t generation() const { return config_.cluster().generation(); }

  const tether::JobConfig& config_;
  const std::string job_id_;
  const std::string reachable_;
  std::unique_ptr<tether::Rendezvous> rdzv_;
  bool published_ = false;
};

// Runs a copy until it ends (server/replica_host.h); a copy whose chain's
// claim went to a replica before it joins that claim as a learner, and so
// on. `hosts`: every host made, kept to the end (the signal handler may
// still hold one); `slot`: where the running one is registered.
tether::Status FollowCopies(const tether::JobConfig& config, std::vector<std::unique_ptr<tether::ReplicaHost>>* hosts,
                            std::atomic<tether::ReplicaHost*>* slot, const std::string& bind,
                            const std::string& advertise) {
  while (true) {
    tether::ReplicaHost& host = *hosts->back();
    slot->store(&host);
    if (g_signal.load() != 0) host.Stop();  // a signal before it was registered
    tether::Status st = host.Run();
    if (!st.ok() || host.rejoin().empty() || g_signal.load() != 0) return st;
    hosts->push_back(std::make_unique<tether::ReplicaHost>(
        config, tether::ReplicaHost::Join{host.shard(), host.rejoin()}));
    hosts->back()->set_key_list_cache_bytes(static_cast<uint64_t>(FLAGS_key_list_cache_bytes));
    if (st = hosts->back()->Start(bind, advertise); !st.ok()) return st;
  }
}

// cluster.replicas = r > 0: the copies of shards --shard − 1, ...,
// --shard − r this process holds (server/replica_host.h), each followed
// and, when that shard's primary is gone, served (or, later in its chain,
// joined again) on a thread of its own beside this process's shard.
class HostedReplicas {
 public:
  // Binds each copy on --listen's host (a free port) and connects to its
  // shard's primary; nothing without replicas.
  tether::Status Start(const tether::JobConfig& config, const std::string& reachable) {
    const int replicas = config.cluster().replicas();
    if (replicas <= 0) return tether::Status::OK();
    const std::string& listen = FLAGS_listen;
    const size_t colon = listen.rfind(':');
    if (listen.rfind("tcp://", 0) != 0 || colon == std::string::npos || colon < 6)
      return tether::Status::InvalidArgument("cluster.replicas needs a tcp:// --listen endpoint, not " + listen);
    if (replicas > kMaxHostedReplicas)
      return tether::Status::InvalidArgument("cluster.replicas=" + std::to_string(replicas) + ": at most " +
                                             std::to_string(kMaxHostedReplicas) + " copies per process");
    bind_ = listen.substr(0, colon) + ":0";
    advertise_ = FLAGS_advertise_host.empty() ? HostOf(reachable) : FLAGS_advertise_host;
    copies_.resize(static_cast<size_t>(replicas));
    for (int d = 1; d <= replicas; ++d) {
      Copy& c = copies_[static_cast<size_t>(d - 1)];
      c.hosts.push_back(std::make_unique<tether::ReplicaHost>(config, FLAGS_shard, d));
      c.hosts.back()->set_key_list_cache_bytes(static_cast<uint64_t>(FLAGS_key_list_cache_bytes));
      TETHER_RETURN_IF_ERROR(c.hosts.back()->Start(bind_, advertise_));
      g_replicas[d - 1].store(c.hosts.back().get());
    }
    for (size_t i = 0; i < copies_.size(); ++i) {
      Copy* c = &copies_[i];
      c->thread = std::thread([this, c, i, &config] {
        c->result = FollowCopies(config, &c->hosts, &g_replicas[i], bind_, advertise_);
        // Refused for a setting that differs: the servers were started
        // with other settings, so this process's own shard cannot run
        // either; it tells its workers why rather than serve them alone.
        const tether::ReplicaHost& host = *c->hosts.back();
        if (const std::string why = host.config_refusal(); !why.empty())
          if (tether::ServerShard* server = g_server.load(); server != nullptr)
            server->CannotRun("this process's copy of shard " + std::to_string(host.shard()) +
                              " was refused by its primary: " + why);
      });
    }
    return tether::Status::OK();
  }
  // Waits for the copies (each ends with its primary's shard, or serves the
  // shard to the end once it claimed it); `st`: this process's own shard's
  // result, which comes first.
  tether::Status Join(tether::Status st) {
    if (!st.ok())
      for (std::atomic<tether::ReplicaHost*>& slot : g_replicas)
        if (tether::ReplicaHost* r = slot.load(); r != nullptr) r->Stop();
    tether::Status result;
    for (Copy& c : copies_) {
      if (!c.thread.joinable()) continue;
      c.thread.join();
      if (!c.result.ok()) LOG(ERROR) << c.result.message();
      if (result.ok()) result = c.result;
    }
    for (std::atomic<tether::ReplicaHost*>& slot : g_replicas) slot.store(nullptr);
    return st.ok() ? result : st;
  }

 private:
  static std::string HostOf(const std::string& endpoint) {
    const size_t colon = endpoint.rfind(':');
    const std::string host = endpoint.substr(6, colon - 6);
    return host.size() > 1 && host.front() == '[' ? host.substr(1, host.size() - 2) : host;
  }

  struct Copy {
    std::vector<std::unique_ptr<tether::ReplicaHost>> hosts;  // the running one last
    std::thread thread;
    tether::Status result;
  };
  std::string bind_, advertise_;
  std::vector<Copy> copies_;
};

// cluster.replicas > 0: the copy this process holds listens on a tcp://
// port of its own beside --listen, and must find its primary.
tether::Status CheckReplicaPlacement(const tether::JobConfig& c) {
  if (c.cluster().replicas() <= 0) return tether::Status::OK();
  if (FLAGS_listen.rfind("tcp://", 0) != 0)
    return tether::Status::InvalidArgument("cluster.replicas=" + std::to_string(c.cluster().replicas()) +
                                           " needs a tcp:// --listen endpoint (the replica serves on a port of its "
                                           "own beside it), not " + FLAGS_listen);
  if (c.cluster().server_addresses_size() == 0 && c.cluster().rendezvous().empty())
    return tether::Status::InvalidArgument(
        "cluster.replicas=" + std::to_string(c.cluster().replicas()) +
        " needs where the other servers are: cluster.server_addresses in the config, or --rendezvous");
  return tether::Status::OK();
}

// --join_as_replica: this process only copies a running shard (and
// serves it if its primary goes). Returns the exit code.
int RunJoin(const tether::JobConfig& config) {
  if (config.cluster().replicas() <= 0) {
    LOG(ERROR) << "[server] --join_as_replica needs cluster.replicas >= 1 (--replicas), as the job's servers have";
    return 2;
  }
  std::vector<std::unique_ptr<tether::ReplicaHost>> hosts;
  hosts.push_back(
      std::make_unique<tether::ReplicaHost>(config, tether::ReplicaHost::Join{ShardGiven() ? FLAGS_shard : -1, ""}));
  hosts.back()->set_key_list_cache_bytes(static_cast<uint64_t>(FLAGS_key_list_cache_bytes));
  g_stop_grace_ms.store(int64_t{FLAGS_stop_grace_s} * 1000);
  tether::InstallStopSignals(RequestStop);
  // A stop signal ends the wait for the rendezvous too (Start looks the
  // shard's primary up).
  g_replicas[0].store(hosts.back().get());
  tether::Status st = hosts.back()->Start(FLAGS_listen, FLAGS_advertise_host);
  if (!st.ok()) LOG(ERROR) << st.message();  // Run() logs its own
  // A joined copy that a claim before it in the chain leaves out joins
  // again, on a free port of the same host.
  const std::string bind = FLAGS_listen.substr(0, FLAGS_listen.rfind(':')) + ":0";
  if (st.ok()) st = FollowCopies(config, &hosts, &g_replicas[0], bind, FLAGS_advertise_host);
  g_replicas[0].store(nullptr);
  if (!st.ok() && g_signal.load() == 0 && hosts.size() == 1 && hosts.back()->nothing_to_join()) {
    LOG(WARNING) << Who() << "every chain asked has all its cluster.replicas=" << config.cluster().replicas()
                 << " replicas: nothing to join, exit " << tether::kExitNothingToJoin;
    return tether::kExitNothingToJoin;
  }
  if (!st.ok() && g_signal.load() == 0) return 1;
  const tether::ReplicaHost& host = *hosts.back();
  return ExitCode(st, host.claimed() && host.copy().job_finished());
}

// Everything before the shard listens: the config, the flags, the
// rendezvous store. The exit code when the shard must not start (logged),
// else 0.
int Prepare(tether::StatusOr<tether::JobConfig>* config, RendezvousSockets* sockets,
            std::unique_ptr<tether::RendezvousStore>* store) {
  *config = tether::LoadConfigFromFlags(Role(), tether::ConfigScope::kServer);
  if (!config->ok()) {
    LOG(ERROR) << Who() << config->status().message();
    return 2;
  }
  const tether::JobConfig& c = **config;
  if (FLAGS_shard < 0 || FLAGS_shard >= c.cluster().num_servers()) {
    LOG(ERROR) << "[server] flag --shard=" << FLAGS_shard << " outside [0, " << c.cluster().num_servers()
               << ") (cluster.num_servers)";
    return 2;
  }
  if (tether::Status st = tether::CheckEndpoint(FLAGS_listen, "flag --listen", tether::EndpointUse::kBind); !st.ok()) {
    LOG(ERROR) << Who() << st.message();
    return 2;
  }
  if (tether::Status st = tether::CheckListenAcrossProcesses(FLAGS_listen, "flag --listen"); !st.ok()) {
    LOG(ERROR) << Who() << st.message();
    return 2;
  }
  // The server writes checkpoints where the workers say (its own
  // checkpoint.dir is not used); a --resume_from it cannot read is refused
  // before it listens.
  if (tether::Status st = tether::CheckCheckpointPaths("", FLAGS_resume_from); !st.ok()) {
    LOG(ERROR) << Who() << st.message();
    return 2;
  }
  if (tether::Status st = CheckReplicaPlacement(c); !st.ok()) {
    LOG(ERROR) << Who() << st.message();
    return 2;
  }
  if (tether::Status st = RendezvousSocketsFor(c, sockets); !st.ok()) {
    LOG(ERROR) << Who() << "rendezvous: " << st.message();
    return 1;
  }
  return ServeRendezvous(c.cluster().rendezvous(), *sockets, store);
}

}  // namespace

int main(int argc, char** argv) {
  tether::ParseFlagsOrDie(
      &argc, &argv,
      {"tether-server --config=JOB.pbtxt --shard=I [--listen=tcp://HOST:PORT] [--port_file=F] "
       "[--rendezvous=file:DIR|tcp://HOST:PORT [--rendezvous_serve]] [--advertise_host=HOST]\n"
       "One parameter-server shard of a job (or, with --join_as_replica, a copy of one); reads the config's "
       "cluster and consistency sections."});
  tether::StatusOr<tether::JobConfig> config = tether::Status::Internal("not loaded");
  RendezvousSockets sockets;
  std::unique_ptr<tether::RendezvousStore> store;
  if (const int code = Prepare(&config, &sockets, &store); code != 0) return code;
  if (FLAGS_join_as_replica) return RunJoin(*config);
  tether::ServerShard server(*config, FLAGS_shard);
  server.set_resume_from(FLAGS_resume_from);
  server.set_key_list_cache_bytes(static_cast<uint64_t>(FLAGS_key_list_cache_bytes));  // ≥ 0: validated
  auto metrics_log = OpenMetricsLog(*config, &server);
  if (!metrics_log.ok()) {
    LOG(ERROR) << Who() << metrics_log.status().message();
    return 2;
  }
  tether::PublishedSnapshot<tether::ShardMetricsSnapshot> published;
  auto endpoint = StartEndpoint(*config, &server, &published);
  if (!endpoint.ok()) {
    LOG(ERROR) << Who() << endpoint.status().message();
    return 2;
  }
  const tether::MetricsTargetWithdrawal withdrawal(Who(), endpoint->get());  // at every exit from here
  if (FLAGS_stop_grace_s < 0) {
    LOG(ERROR) << Who() << "flag --stop_grace_s=" << FLAGS_stop_grace_s << " is negative";
    return 2;
  }
  // Whether the job checkpoints is the workers' to say (a server learns the
  // folder from them, whatever its own config): every server serves their
  // stop checkpoint, and workers without a checkpoint dir just leave.
  g_stop_grace_ms.store(int64_t{FLAGS_stop_grace_s} * 1000);
  g_server.store(&server);
  tether::InstallStopSignals(RequestStop);  // SIGTERM, SIGINT, SIGHUP, SIGUSR1/2, SIGXCPU, SIGPWR
  std::string reachable;
  tether::Status st = Listen(&server, &reachable);
  RendezvousEntry entry(*config, reachable);
  if (st.ok() && !config->cluster().rendezvous().empty()) st = entry.Publish(sockets.client);
  HostedReplicas replica;
  if (st.ok()) st = replica.Start(*config, reachable);
  bool ran = false;
  if (st.ok() && g_signal.load() == 0) {
    ran = true;
    st = server.Run();
  }
  st = replica.Join(st);
  if (st.ok() && *metrics_log != nullptr) st = (*metrics_log)->Flush();
  g_server.store(nullptr);
  entry.Withdraw();
  const int code = ExitCode(st, ran && server.job_finished());
  // A signal that stopped the job ends the process at once; one during the
  // linger only cuts the linger short. A shard that never ran (bind error)
  // has nothing to show.
  if (ran && g_signal.load() == 0) tether::LingerForScrapes(Who(), endpoint->get(), g_signal);
  return code;
}

namespace {
int ExitCode(const tether::Status& st, bool finished) {
  if (const int sig = g_signal.load(); sig != 0 && st.ok() && finished) {
    LOG(INFO) << Who() << "stop signal " << sig << " (" << strsignal(sig)
              << ") came while the workers finished the job: the job finished, exit 0";
    return 0;
  }
  if (const int sig = g_signal.load(); sig != 0) {
    LOG(WARNING) << Who() << "stopped by signal " << sig << " (" << strsignal(sig)
                 << ") before the job finished: exit " << 128 + sig
                 << (st.ok() ? "" : " (" + st.message() + ")");
    return 128 + sig;
  }
  if (!st.ok()) {
    // The shard's (or the joining host's) own errors already carry a
    // "[server N] " or "[joining replica of shard N] " prefix.
    LOG(ERROR) << (st.message().rfind('[', 0) == 0 ? "" : Who()) << st.message();
    return 1;
  }
  return 0;
}
}  // namespace
