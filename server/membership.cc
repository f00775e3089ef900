#include "server/membership.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <zmq.h>

#include "core/config.h"
#include "core/names.h"

namespace tether {
namespace {

int64_t MsSince(std::chrono::steady_clock::time_point t, std::chrono::steady_clock::time_point now) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - t).count();
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

}  // namespace

void HandshakeFailures::Record(uint16_t event, uint32_t value, const std::string& endpoint,
                               const std::string& log_prefix) {
  ++refused_;
  // The ZAP handler has logged a refused key already, with its address.
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) return;
  const uint64_t n = ++failures_;
  uint64_t p = 1;
  while (p < n) p *= 10;
  if (p != n) return;
  char code[16];
  std::snprintf(code, sizeof(code), "0x%x", value);
  LOG(WARNING) << log_prefix << "refused a connection on " << endpoint << ": its CURVE handshake failed ("
               << (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ? std::string("protocol error ") + code
                                                                : std::string("no detail, errno ") + std::to_string(value))
               << "): a peer without CURVE (plain frames) or without this server's public key "
               << "(security.curve.server_public_key_file)" << (n > 1 ? " (" + std::to_string(n) + " times)" : "");
}

Membership::Membership(const MembershipOptions& o, ClockTracker* clocks, ServerStats* stats, Outbox* outbox)
    : options_(o), clocks_(clocks), stats_(stats), outbox_(outbox), workers_(o.initial_workers) {}

void Membership::EnsureSlot(int rank) {
  // A HELLO from a rank beyond the slots held so far (a joiner, within
  // max_workers): its slot counts for nothing until admitted.
  if (rank >= slots()) workers_.resize(static_cast<size_t>(rank) + 1);
}

void Membership::SeenAll() {
  const auto now = std::chrono::steady_clock::now();
  for (Worker& w : workers_) w.last_seen = now;
}

bool Membership::Member(int rank) const {
  return rank < options_.initial_workers || (rank < slots() && workers_[rank].said_hello);
}

bool Membership::Refuse(const std::string& identity, const MessageHeader& h, const std::string& why,
                        bool for_settings) {
  const int rank = h.sender_rank();
  LOG(ERROR) << outbox_->log_prefix() << "refusing worker " << rank << ": " << why;
  if (for_settings) Told(rank);
  if (rank >= 0 && rank < options_.initial_workers && !workers_[rank].said_hello) {
    refusals_[rank] = RefusalNote(why, identity);
    if (for_settings)
      settings_refusals_.insert(rank);
    else
      settings_refusals_.erase(rank);
  }
  outbox_->SendError(identity, h, why);
  return false;
}

std::string Membership::CheckPeerHello(const MessageHeader& h, const std::string& who) {
  // Who is talking to whom (case C26): the same protocol, the same job and
  // generation, and this shard where the worker's list puts it.
  // The version first: a peer of another version sends no HelloBody this
  // build can read (protocol_version keeps its number in every version).
  const std::string server = "server " + std::to_string(options_.shard);
  if (h.protocol_version() != kProtocolVersion)
    return "protocol version differs: " + who + " speaks version " + std::to_string(h.protocol_version()) + ", " +
           server + " speaks version " + std::to_string(kProtocolVersion) + " (run the same Tether build on both sides)";
  const HelloBody& b = h.hello();
  if (b.job_id() != options_.job_id || b.generation() != options_.generation)
    return "job differs: " + who + " is of job " + QuoteForLog(b.job_id()) + " generation " + std::to_string(b.generation()) +
           ", " + server + " serves job '" + options_.job_id + "' generation " + std::to_string(options_.generation) +
           " (cluster.job_id / cluster.generation, or the config's name)";
  if (b.shard() != options_.shard || b.num_shards() != options_.num_shards)
    return "server " + endpoint_ + " is shard " + std::to_string(options_.shard) + " of " +
           std::to_string(options_.num_shards) + " but " + who + " lists it as shard " + std::to_string(b.shard()) +
           " of " + std::to_string(b.num_shards()) + " in --server_addresses";
  return "";
}

std::string Membership::CheckJobSize(const HelloBody& h, const std::string& who) const {
  if (!h.has_num_workers() || h.num_workers() == options_.initial_workers) return "";
  return "cluster.num_workers differs: " + who + " has " + std::to_string(h.num_workers()) + ", server " +
         std::to_string(options_.shard) + " has " + std::to_string(options_.initial_workers) +
         " (--num_workers must be the same on every server and worker)";
}

std::string Membership::CheckHelloBody(const HelloBody& h, const std::string& who, const std::string& server) {
  if (h.has_consistency_model() && (h.consistency_model() == AVERAGE) != (options_.model == AVERAGE))
    return "consistency model differs: " + who + " trains with " + ConsistencyModel_Name(h.consistency_model()) +
           ", " + server + " with " + ConsistencyModel_Name(options_.model) +
           " (consistency.model / --consistency_model must be the same on every server and worker)";
  if (h.has_data_on_demand()) {
    if (!data_on_demand_.has_value()) {
      data_on_demand_ = h.data_on_demand();
    } else if (*data_on_demand_ != h.data_on_demand()) {
      auto mode = [](bool on) { return std::string(on ? "draws its rows on demand" : "trains its static split"); };
      return "train.data_on_demand differs: " + who + " " + mode(h.data_on_demand()) + ", the job's workers so far " +
             mode(*data_on_demand_) + " (give every worker the same --data_on_demand: mixed, rows would be trained twice)";
    }
  }
  if (h.has_train_epochs()) {
    if (!epochs_.has_value()) {
      epochs_ = h.train_epochs();
    } else if (*epochs_ != h.train_epochs()) {
      return "train.epochs differs: " + who + " trains " + std::to_string(h.train_epochs()) +
             " epoch(s), the job's workers so far " + std::to_string(*epochs_) + " (give every worker the same --epochs)";
    }
  }
  if (h.has_checkpoint_dir()) {
    auto where = [](const std::string& d) {
      return d.empty() ? std::string("writes no checkpoints") : "writes its checkpoints to " + d;
    };
    if (!checkpoint_dir_.has_value()) {
      checkpoint_dir_ = h.checkpoint_dir();
    } else if (*checkpoint_dir_ != h.checkpoint_dir()) {
      return "checkpoint.dir differs: " + who + " " + where(h.checkpoint_dir()) + ", the job's workers so far " +
             (checkpoint_dir_->empty() ? "write none" : "to " + *checkpoint_dir_) +
             " (give every worker the same --checkpoint_dir, as one path on a shared file system: each checkpoint "
             "gathers every process's files in one folder)";
    }
  }
  if (h.staleness() != clocks_->staleness())
    return "staleness differs: " + who + " has " + StalenessName(h.staleness()) + ", " + server + " has " +
           StalenessName(clocks_->staleness());
  return "";
}

std::string Membership::CheckDataDigests(const HelloBody& h, const std::string& who) {
  if (h.data_digests_size() == 0) return "";
  if (data_digests_.empty()) {
    for (const DataDigest& d : h.data_digests()) data_digests_.push_back({d.field(), d.digest()});
    return "";
  }
  for (const DataDigest& d : h.data_digests())
    for (const auto& [field, digest] : data_digests_)
      if (field == d.field() && digest != d.digest())
        return "the data differs: " + who + "'s " + QuoteForLog(d.field()) +
               " files are not the job's (worker 0's, or the first admitted worker's: their sizes or contents "
               "differ; paths and times are not compared): give every worker the same data files and split files";
  return "";
}

bool Membership::SecondClaim(const std::string& identity, Message* m, const std::string& who) {
  // One rank, one connection: a HELLO for a rank that another connection
  // holds is a second claim, refused while that connection is live, so a
  // stray or hostile process cannot take over a working rank's clock and
  // updates. A worker restarted after a crash comes on a new connection
  // once the old one is gone (its TCP connection closed with the process; a
  // vanished host's is closed by the ZMTP heartbeats within
  // cluster.liveness_timeout_ms), and rejoins as before.
  const int rank = m->header.sender_rank();
  const std::string* holder = nullptr;
  if (rank >= 0 && rank < slots() && workers_[rank].said_hello && !workers_[rank].said_bye)
    holder = &workers_[rank].identity;
  auto waiting = waiting_.find(rank);
  if (waiting != waiting_.end()) holder = &waiting->second.identity;
  if (holder == nullptr || *holder == identity || !outbox_->ConnectionLive(*holder)) return false;
  LOG(ERROR) << outbox_->log_prefix() << "second claim on " << who << " refused: connection "
             << PeerName(identity, *m) << " says HELLO as " << who << ", which connection "
             << DescribeIdentity(*holder) << " holds and is still live";
  outbox_->SendError(identity, m->header,
                     who + " is already connected to server " + std::to_string(options_.shard) +
                         " from another connection that is still live: a second claim on a rank is refused "
                         "(a restarted worker rejoins once its old connection is gone, within "
                         "cluster.liveness_timeout_ms=" +
                         std::to_string(options_.liveness_timeout_ms) + " for a vanished host)");
  return true;
}

Membership::Hello Membership::Check(const std::string& identity, Message* m, bool tables_defined) {
  const MessageHeader& h = m->header;
  const int rank = h.sender_rank();
  const std::string who = "worker " + std::to_string(rank);
  // Not this job's worker where it says it is (another build, job or
  // generation, or the wrong shard): refused, but never taken for the
  // rank's answer (a stray peer must not end the job: CheckRefusals).
  if (const std::string why = CheckPeerHello(h, who); !why.empty()) {
    Refuse(identity, h, why);
    return Hello::kRefused;
  }
  if (const std::string why = CheckJobSize(h.hello(), who); !why.empty()) {
    Refuse(identity, h, why, /*for_settings=*/true);
    JobSizeDiffers(identity, h, why);
    return Hello::kRefused;
  }
  if (const std::string why = CheckHelloBody(h.hello(), who, "server " + std::to_string(options_.shard));
      !why.empty()) {
    Refuse(identity, h, why, /*for_settings=*/true);
    return Hello::kRefused;
  }
  if (SecondClaim(identity, m, who)) return Hello::kRefused;
  if (tables_defined || rank == 0) {
    // Worker 0's data is the job's; a HELLO that waits for it is checked
    // when it is handled again after worker 0's.
    if (const std::string why = CheckDataDigests(h.hello(), who); !why.empty()) {
      Refuse(identity, h, why, /*for_settings=*/true);
      return Hello::kRefused;
    }
    return Hello::kAdmit;
  }
  if (waiting_.count(rank) == 0)
    VLOG(1) << outbox_->log_prefix() << who << " waits for worker 0, whose HELLO defines the job's tables";
  waiting_[rank] = {identity, std::move(*m)};
  return Hello::kWaiting;
}

Membership::Admission Membership::Admit(int rank, const std::string& identity, int64_t resume_clock) {
  Worker& w = workers_[rank];
  Admission a;
  // A resumed job starts every worker at the checkpoint's clock.
  a.start_clock = std::max<int64_t>(0, resume_clock);
  a.rejoined = w.said_hello;
  const std::string& prefix = outbox_->log_prefix();
  if (w.said_hello) {
    // A worker rejoining (after a crash or a timeout) starts at the
    // slowest live clock, so nobody waits for clocks it will never
    // replay, and pulls fresh rows (its cache starts empty).
    a.start_clock = clocks_->StartClock(rank);
    a.rejoin_clock = clocks_->clock(rank);
    ++stats_->workers_rejoined;
    LOG(WARNING) << prefix << "worker " << rank << " rejoined at clock " << a.start_clock << " (was at "
                 << clocks_->clock(rank) << (w.dead ? ", timed out" : "") << ")";
  } else if (rank >= options_.initial_workers) {
    // A new rank joining the running job (elastic membership): like a
    // rejoin, it starts at the slowest clock that counts, and from then
    // on counts in the bound.
    a.start_clock = std::max(a.start_clock, clocks_->StartClock(rank));
    ++stats_->workers_joined;
    LOG(INFO) << prefix << "worker " << rank << " joined the running job at clock " << a.start_clock
              << " (beyond the " << options_.initial_workers << " initial worker(s); cluster.max_workers "
              << options_.max_workers << ")";
  } else {
    LOG(INFO) << prefix << "worker " << rank << " joined";
  }
  w = Worker();
  w.said_hello = true;
  w.identity = identity;
  w.joined_clock = a.start_clock;
  w.last_seen = std::chrono::steady_clock::now();
  a.min_clock_changed = clocks_->Join(rank, a.start_clock);
  return a;
}

void Membership::Welcome(const std::string& identity, const MessageHeader& h, const Admission& a,
                         uint64_t key_list_bytes) {
  Message reply;
  reply.header.set_type(HELLO_REPLY);
  reply.header.set_request_id(h.request_id());
  reply.header.set_min_clock(clocks_->settled_clock());
  reply.header.set_protocol_version(kProtocolVersion);
  HelloReplyBody& body = *reply.header.mutable_hello_reply();
  body.set_start_clock(a.start_clock);
  if (a.rejoin_clock >= 0) body.set_rejoin_clock(a.rejoin_clock);
  if (a.rejoin_samples > 0) body.set_rejoin_samples(a.rejoin_samples);
  body.set_shard(options_.shard);
  body.set_num_shards(options_.num_shards);
  body.set_job_id(options_.job_id);
  body.set_generation(options_.generation);
  if (key_list_bytes > 0) body.set_key_list_cache_bytes(key_list_bytes);
  outbox_->Send(identity, &reply, h.sender_rank());
}

std::vector<std::pair<std::string, Message>> Membership::TakeWaiting() {
  std::vector<std::pair<std::string, Message>> out;
  for (auto& [rank, p] : waiting_) out.emplace_back(p.identity, std::move(p.hello));
  waiting_.clear();
  return out;
}

void Membership::RefuseWaiting(const std::string& why) {
  for (auto& [rank, p] : waiting_) {
    LOG(ERROR) << outbox_->log_prefix() << "refusing worker " << rank << ": " << why;
    if (rank >= 0 && rank < options_.initial_workers) {
      refusals_[rank] = RefusalNote(why, p.identity);
      settings_refusals_.erase(rank);
    }
    outbox_->SendError(p.identity, p.hello.header, why);
  }
  waiting_.clear();
}

int Membership::InitialRanksRefused() const {
  int told = 0;
  for (int r = 0; r < options_.initial_workers; ++r) told += refusals_.count(r) > 0;
  return told;
}

bool Membership::Arrive(int rank, const std::string& identity, const MessageHeader& h) {
  Worker& w = workers_[rank];
  w.at_barrier = true;
  w.identity = identity;
  w.samples = h.barrier().samples();
  w.barrier_request = h.request_id();
  w.stats = h.barrier().worker_stats();
  w.finished = true;
  w.data_done = h.barrier().data_done();
  return clocks_->Remove(rank);
}

void Membership::ReleaseBarrier(JobCoordinator* coordinator) {
  // The job's end: every worker that joined and did not leave is here (a
  // joiner's slot never taken holds nobody back).
  uint64_t total = 0;
  int evaluator = -1;  // the lowest rank here: it evaluates and reports
  for (int r = 0; r < slots(); ++r) {
    const Worker& w = workers_[r];
    if (!Member(r)) continue;
    if (!w.at_barrier && !w.said_bye && !w.dead) return;
    total += w.samples;
    if (evaluator < 0 && w.at_barrier && !w.said_bye && !w.dead) evaluator = r;
  }
  if (evaluator < 0) return;  // nobody is waiting
  // The job coordinator fixes the evaluator (its first release's); the
  // workers read it from the coordinator's shard only.
  if (coordinator != nullptr) {
    evaluator = coordinator->Evaluator(evaluator);
    total = coordinator->TotalSamples();
  }
  int64_t latest = 0;
  for (int r = 0; r < clocks_->num_workers(); ++r) latest = std::max(latest, clocks_->clock(r));
  for (int r = 0; r < slots(); ++r) {
    Worker& w = workers_[r];
    if (!w.at_barrier || w.said_bye || w.dead) continue;
    Message reply;
    reply.header.set_type(BARRIER_REPLY);
    reply.header.set_request_id(w.barrier_request);
    BarrierReplyBody& body = *reply.header.mutable_barrier_reply();
    body.set_total_samples(total);
    body.set_max_clock(latest);
    if (coordinator != nullptr) body.set_evaluator_rank(evaluator);
    outbox_->Send(w.identity, &reply, r);
    w.at_barrier = false;
  }
}

bool Membership::Leave(int rank) {
  workers_[rank].said_bye = true;
  return clocks_->Remove(rank);
}

void Membership::AnswerBye(int rank, const std::string& identity, const MessageHeader& h) {
  LOG(INFO) << outbox_->log_prefix() << "worker " << rank << " left";
  if (workers_[rank].finished) {
    // It finished (passed the barrier): its goodbye is answered with the
    // job's outcome once this shard's part of the job ends, so it exits
    // non-zero when the job fails after it (a worker removed during the
    // evaluation). Every worker left by then: no wait.
    held_byes_.push_back({identity, h.request_id(), rank});
    return;
  }
  // Leaving early on purpose (a stop, elastic): no outcome to wait for.
  Message reply;
  reply.header.set_type(BYE_REPLY);
  reply.header.set_request_id(h.request_id());
  outbox_->Send(identity, &reply, rank);
}

int Membership::AnswerHeldByes(const Status& outcome) {
  for (const HeldBye& b : held_byes_) {
    Message reply;
    reply.header.set_type(outcome.ok() ? BYE_REPLY : ERROR_REPLY);
    reply.header.set_request_id(b.request_id);
    if (!outcome.ok()) reply.header.mutable_error_reply()->set_error(outcome.message());
    outbox_->Send(b.identity, &reply, b.rank);
  }
  const int n = static_cast<int>(held_byes_.size());
  if (n > 0 && !outcome.ok())
    LOG(INFO) << outbox_->log_prefix() << "told " << n << " finished worker(s) that the job failed";
  held_byes_.clear();
  return n;
}

StatusOr<Membership::Silent> Membership::NextSilent(std::chrono::steady_clock::time_point now) {
  const int64_t timeout_ms = options_.worker_timeout_ms;
  for (int rank = 0; rank < slots(); ++rank) {
    Worker& w = workers_[rank];
    if (!w.said_hello || w.said_bye || w.dead || w.at_barrier) continue;
    const int64_t silent_ms = MsSince(w.last_seen, now);
    if (silent_ms <= timeout_ms) continue;
    const std::string at = " ms at clock " + std::to_string(clocks_->clock(rank)) +
                           " (cluster.worker_timeout_ms=" + std::to_string(timeout_ms);
    if (options_.on_worker_timeout == FAIL_JOB)
      return Status::Unavailable(outbox_->log_prefix() + "worker " + std::to_string(rank) + " silent for " +
                                 std::to_string(silent_ms) + at + ", on_worker_timeout: FAIL_JOB)");
    return MarkRemoved(rank, silent_ms);
  }
  return Silent{};
}

Membership::Silent Membership::MarkRemoved(int rank, int64_t silent_ms) {
  Worker& w = workers_[rank];
  const std::string at = " ms at clock " + std::to_string(clocks_->clock(rank)) +
                         " (cluster.worker_timeout_ms=" + std::to_string(options_.worker_timeout_ms);
  w.dead = true;
  w.removed_why = "removed: silent for " + std::to_string(silent_ms) + at + ")";
  ++stats_->workers_timed_out;
  // Told now, unasked: a worker that was stopped (SIGSTOP, a swapped-out
  // host) reads it when it wakes, before it finds this shard gone. A dead
  // one's connection is closed: nobody to tell.
  if (!w.identity.empty() && outbox_->ConnectionLive(w.identity)) {
    Message removed;
    removed.header.set_type(REMOVED);
    removed.header.mutable_removed()->set_reason(outbox_->log_prefix() + "worker " + std::to_string(rank) + " " + w.removed_why);
    outbox_->Send(w.identity, &removed, rank);
  }
  return Silent{rank, silent_ms};
}

bool Membership::RemoveSilent(const Silent& s) {
  const int64_t others = clocks_->MinClockExcluding(s.rank);
  LOG(WARNING) << outbox_->log_prefix() << "worker " << s.rank << " silent for " << s.silent_ms
               << " ms: removed from the min clock at its clock " << clocks_->clock(s.rank)
               << " (slowest other worker at "
               << (others == ClockTracker::kNoWorkers ? std::string("none") : std::to_string(others)) << ")";
  return clocks_->Remove(s.rank);
}

std::string Membership::RefusalNote(const std::string& why, const std::string& identity) {
  // The connection names the process (a worker's identity holds its pid).
  return why + "; connection " + DescribeIdentity(identity);
}

std::string Membership::RefusedRanks() const {
  std::string refused;
  for (const auto& [rank, why] : refusals_)
    refused += (refused.empty() ? "" : "; ") + std::string("worker ") + std::to_string(rank) + " (refused: " + why + ")";
  return refused;
}

Status Membership::CheckRefusals() const {
  // Every initial rank's worker said HELLO and was refused for its
  // settings (staleness, epochs, tables, resume, data): no worker is left
  // to come and none trains, so waiting out cluster.startup_timeout_ms
  // would only hide why. While a rank joined (or waits for worker 0), a
  // refused one may still be started again with the right flags within
  // that time; a peer of another build, job or shard, or one that sent a
  // malformed HELLO, is no rank's answer (a stray peer must not end a job).
  if (first_hello_done_) return Status::OK();
  for (int r = 0; r < options_.initial_workers; ++r)
    if (workers_[r].said_hello || waiting_.count(r) != 0 || settings_refusals_.count(r) == 0) return Status::OK();
  return Status::FailedPrecondition(outbox_->log_prefix() + "the job cannot run: " + RefusedRanks() +
                                    "; every one of its " + std::to_string(options_.initial_workers) +
                                    " initial worker(s) was refused, so no worker is left to come (not waiting out "
                                    "cluster.startup_timeout_ms=" +
                                    std::to_string(options_.startup_timeout_ms) + ")");
}

void Membership::Told(int rank) {
  if (rank >= 0 && rank < kMaxJobRanks) told_.insert(rank);
}

bool Membership::CannotRun(const std::string& why) {
  if (cannot_run()) return true;
  for (const Worker& w : workers_)
    if (w.said_hello) return false;
  cannot_run_ = why;
  ranks_to_tell_ = std::max(ranks_to_tell_, options_.initial_workers);
  LOG(ERROR) << outbox_->log_prefix() << "the job cannot run: " << why << "; refusing every worker that comes";
  for (auto& [rank, p] : waiting_) {
    outbox_->SendError(p.identity, p.hello.header, "the job cannot run: " + why);
    Told(rank);
  }
  waiting_.clear();
  return true;
}

void Membership::JobSizeDiffers(const std::string& identity, const MessageHeader& h, const std::string& why) {
  // Servers and workers started for jobs of different sizes: no worker
  // started again alone mends that, and the ranks the worker's count names
  // are among those to tell.
  Told(h.sender_rank());
  ranks_to_tell_ = std::max(ranks_to_tell_, std::min(h.hello().num_workers(), kMaxJobRanks));
  CannotRun("worker " + std::to_string(h.sender_rank()) + " (refused: " + RefusalNote(why, identity) + ")");
}

void Membership::RefusedBeforeCheck(const std::string& identity, const MessageHeader& h, const std::string& why) {
  const std::string who = "worker " + std::to_string(h.sender_rank());
  if (h.type() != HELLO || !CheckPeerHello(h, who).empty() || CheckJobSize(h.hello(), who).empty()) return;
  JobSizeDiffers(identity, h, why);
}

void Membership::RefuseAtStart(const std::string& identity, const Message& m) {
  const MessageHeader& h = m.header;
  const std::string who = "worker " + std::to_string(h.sender_rank());
  if (const std::string why = CheckPeerHello(h, who); !why.empty()) {
    LOG(ERROR) << outbox_->log_prefix() << "refusing " << who << ": " << why;
    outbox_->SendError(identity, h, why);
    return;
  }
  std::string why = CheckJobSize(h.hello(), who);
  if (!why.empty())
    ranks_to_tell_ = std::max(ranks_to_tell_, std::min(h.hello().num_workers(), kMaxJobRanks));
  else
    why = "the job cannot run: " + cannot_run_;
  LOG(ERROR) << outbox_->log_prefix() << "refusing " << who << ": " << why;
  outbox_->SendError(identity, h, why);
  Told(h.sender_rank());
}

Status Membership::CheckCannotRun(std::chrono::steady_clock::time_point now) {
  if (!cannot_run_since_) cannot_run_since_ = now;
  std::string untold;
  int missing = 0;
  for (int r = 0; r < ranks_to_tell_; ++r) {
    if (told_.count(r) != 0) continue;
    if (++missing <= 5) untold += (untold.empty() ? "" : ", ") + std::to_string(r);
  }
  if (missing > 5) untold += " and " + std::to_string(missing - 5) + " more";
  if (missing > 0 && MsSince(*cannot_run_since_, now) <= kCannotRunLingerMs) return Status::OK();
  return Status::FailedPrecondition(
      outbox_->log_prefix() + "the job cannot run: " + cannot_run_ +
      (missing > 0 ? "; worker(s) " + untold + " not told (none came within " + std::to_string(kCannotRunLingerMs) +
                         " ms)"
                   : std::string()) +
      " (not waiting out cluster.startup_timeout_ms=" + std::to_string(options_.startup_timeout_ms) + ")");
}

Status Membership::CheckStartup(bool any_hello, std::chrono::steady_clock::time_point now) {
  if (cannot_run()) return CheckCannotRun(now);
  TETHER_RETURN_IF_ERROR(CheckRefusals());
  if (any_hello && !first_hello_ && !first_hello_done_) first_hello_ = now;
  if (!first_hello_ || MsSince(*first_hello_, now) <= options_.startup_timeout_ms) return Status::OK();
  // A rank that never joined holds every other worker at the staleness
  // bound (and the barrier) for good: the job cannot run without it.
  std::string missing;
  for (int r = 0; r < options_.initial_workers; ++r) {
    if (workers_[r].said_hello) continue;
    missing += (missing.empty() ? "" : "; ") + std::string("worker ") + std::to_string(r);
    auto why = refusals_.find(r);
    if (why != refusals_.end()) missing += " (refused: " + why->second + ")";
  }
  if (!missing.empty())
    return Status::DeadlineExceeded(outbox_->log_prefix() + "the job cannot run: " + missing + " did not join within " +
                                    "cluster.startup_timeout_ms=" + std::to_string(options_.startup_timeout_ms) +
                                    " of the first worker's HELLO");
  first_hello_.reset();
  first_hello_done_ = true;
  return Status::OK();
}

void Membership::ReportJoinWait(std::chrono::steady_clock::time_point started,
                                std::chrono::steady_clock::time_point now) {
  if (first_hello_done_ || cannot_run()) {
    join_report_.Stop();
    return;
  }
  // The wait starts over at the first HELLO, as its limit does.
  const auto since = first_hello_ ? *first_hello_ : started;
  if (!join_report_.running() || since != join_since_) {
    join_report_.Start(since);
    join_since_ = since;
  }
  int64_t waited_ms = 0;
  if (!join_report_.Due(now, &waited_ms)) return;
  std::vector<std::string> missing;
  for (int r = 0; r < options_.initial_workers && r < slots(); ++r) {
    if (workers_[r].said_hello) continue;
    auto why = refusals_.find(r);
    missing.push_back(std::to_string(r) + (why == refusals_.end() ? "" : " (refused: " + why->second + ")"));
  }
  if (missing.empty()) return;
  LOG(INFO) << outbox_->log_prefix()
            << WaitingForWorkersLine(missing, options_.initial_workers, waited_ms, options_.startup_timeout_ms);
}

bool Membership::AllGone() const {
  for (int r = 0; r < slots(); ++r)
    if (Member(r) && !workers_[r].said_bye && !workers_[r].dead) return false;
  return true;
}

int Membership::Staying() const {
  int staying = 0;
  for (const Worker& w : workers_) staying += w.said_hello && !w.said_bye && !w.dead;
  return staying;
}

int Membership::MissingInitial() const {
  int missing = 0;
  for (int r = 0; r < options_.initial_workers && r < slots(); ++r) missing += !workers_[r].said_hello;
  return missing;
}

std::vector<std::string> Membership::StayingIdentities() const {
  std::vector<std::string> out;
  for (const Worker& w : workers_)
    if (w.said_hello && !w.said_bye && !w.dead) out.push_back(w.identity);
  return out;
}

bool Membership::JobFinished() const {
  bool any = false, all_finished = true;
  for (const Worker& w : workers_) {
    if (!w.said_hello) continue;
    any = true;
    all_finished = all_finished && w.finished && !w.dead;
  }
  return any && all_finished;
}

std::string Membership::Removed() const {
  std::string removed;
  for (int r = 0; r < slots(); ++r)
    if (workers_[r].dead) removed += (removed.empty() ? "" : ", ") + std::to_string(r);
  return removed;
}

bool Membership::AnyDataDone() const {
  for (const Worker& w : workers_)
    if (w.data_done) return true;
  return false;
}

int Membership::FailWaiting(const std::string& why) {
  int told = 0;
  auto fail = [&](const std::string& identity, uint64_t request_id, int rank) {
    Message reply;
    reply.header.set_type(ERROR_REPLY);
    reply.header.set_request_id(request_id);
    reply.header.mutable_error_reply()->set_error(why);
    outbox_->Send(identity, &reply, rank);
    ++told;
  };
  for (const auto& [rank, p] : waiting_) fail(p.identity, p.hello.header.request_id(), rank);
  for (int r = 0; r < slots(); ++r) {
    const Worker& w = workers_[r];
    if (w.at_barrier && !w.identity.empty()) fail(w.identity, w.barrier_request, r);
  }
  return told;
}

int Membership::StatsRanks() const {
  // One entry per rank up to the highest that took part (joiners included;
  // a slot skipped over has zeros and an empty WorkerStats).
  int ranks = std::min(slots(), options_.initial_workers);
  for (int r = ranks; r < slots(); ++r)
    if (workers_[r].said_hello) ranks = r + 1;
  return ranks;
}

}  // namespace tether
