// Membership: who is in the job, as one shard sees it. One slot per rank
// (the initial ranks [0, cluster.num_workers), grown by a joiner's HELLO
// up to cluster.max_workers), and what each rank did: its HELLO (checked:
// the same protocol, job, generation, number of workers, consistency
// model, data mode, epochs and staleness, this shard where the worker's
// list puts it, one live connection per rank), its BARRIER, its BYE
// (held and answered with the job's outcome when it had finished), its
// silence (removed after cluster.worker_timeout_ms, or the job fails under
// FAIL_JOB), the deadline for every initial rank to join
// (cluster.startup_timeout_ms of the first HELLO), and a job that cannot
// run (CannotRun: servers or workers started with settings that disagree,
// found before any worker joined: every worker is refused with the
// reason, and the job ends once each was told). Workers join at the
// slowest clock that counts (docs/CONSISTENCY.md "Joining and leaving"):
// Membership moves them in and out of the shard's ClockTracker.
//
// HELLOs of other ranks that come before worker 0's wait for it: worker 0
// declares the job's tables (the authority), so two shards never adopt
// different tables because different workers reached them first.
//
// Protocol logic only: it sends through an Outbox and reads no socket, so
// membership_test.cc drives it in one process. The caller (ServerShard)
// does what other rooms do on each event, in the order the event needs.
//
// Ownership: the shard owns it; the ClockTracker, ServerStats and Outbox
// it is given are the shard's and outlive it. Thread-safety: none (Run()'s
// thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/net/message.h"
#include "core/status.h"
#include "core/wait_report.h"
#include "proto/config.pb.h"
#include "proto/stats.pb.h"
#include "proto/tables.pb.h"
#include "proto/wire.pb.h"
#include "server/clock_tracker.h"
#include "server/coordinator/job_coordinator.h"
#include "core/net/outbox.h"
#include "server/shard_stats.h"

namespace tether {

class MembershipState;  // proto/shard_state.proto

/// What a shard's membership checks a HELLO against (from the job config).
struct MembershipOptions {
  int shard = 0, num_shards = 1;
  std::string job_id;
  uint64_t generation = 0;
  ConsistencyModel model = SSP;          // consistency.model
  int initial_workers = 1;               // cluster.num_workers
  int max_workers = 1;                   // MaxWorkers(cluster)
  int64_t startup_timeout_ms = 0;        // cluster.startup_timeout_ms
  int64_t worker_timeout_ms = 0;         // cluster.worker_timeout_ms
  int64_t liveness_timeout_ms = 0;       // cluster.liveness_timeout_ms (named in a refusal)
  WorkerTimeoutAction on_worker_timeout = REMOVE_WORKER;
};

/// The shard's CURVE handshake failures (peers without CURVE, or with
/// another server key; refused keys are the ZAP handler's to log): counted,
/// and logged at the 1st, 10th, 100th ... (a refused peer reconnects every
/// 100 ms or so).
class HandshakeFailures {
 public:
  /// One ZMQ_EVENT_HANDSHAKE_FAILED_* monitor event (`event`, its `value`)
  /// on `endpoint`; `log_prefix` starts the line.
  void Record(uint16_t event, uint32_t value, const std::string& endpoint, const std::string& log_prefix);
  /// Every failure so far, refused keys included.
  uint64_t refused() const { return refused_; }
  /// Those that are not refused keys (the ones logged at powers of ten).
  uint64_t failures() const { return failures_; }

 private:
  uint64_t refused_ = 0, failures_ = 0;
};

class Membership {
 public:
  struct Worker {
    bool said_hello = false, at_barrier = false, said_bye = false, dead = false;
    std::string removed_why;  // set with `dead`: "removed: silent for N ms ..."
    bool finished = false;    // reached the barrier (stays set once released)
    bool data_done = false;   // BARRIER said data on demand is DONE (BarrierBody.data_done)
    uint64_t samples = 0;
    uint64_t barrier_request = 0;
    // The clock this process (re)joined at: it takes no checkpoint at or
    // before it (a cut pending there cannot have its state).
    int64_t joined_clock = -1;
    std::string identity;
    WorkerStats stats;  // the worker's counters, from its BARRIER
    std::chrono::steady_clock::time_point last_seen;
  };

  Membership(const MembershipOptions& o, ClockTracker* clocks, ServerStats* stats, Outbox* outbox);
  /// The endpoint this shard serves (named when a worker lists it wrongly).
  void set_endpoint(const std::string& endpoint) { endpoint_ = endpoint; }

  // ---- Slots.
  /// Slots held: the initial ranks, grown to the highest rank heard + 1.
  int slots() const { return static_cast<int>(workers_.size()); }
  /// Grows the slots to hold `rank` (< max_workers; a request checked).
  void EnsureSlot(int rank);
  const Worker& worker(int rank) const { return workers_[rank]; }
  /// `rank` was heard from now (a request of any kind).
  void Seen(int rank) { workers_[rank].last_seen = std::chrono::steady_clock::now(); }
  /// Every worker was heard from now (the loop was held, e.g. by a
  /// checkpoint write: nobody was silent meanwhile).
  void SeenAll();
  /// An initial rank (joined or still expected), or one that joined later.
  bool Member(int rank) const;

  // ---- HELLO.
  enum class Hello { kAdmit, kRefused, kWaiting };
  /// Checks `m` (a HELLO from `identity`): refused (ERROR_REPLY sent),
  /// waiting for worker 0's (kept; `tables_defined` false and rank ≠ 0), or
  /// to be admitted once the caller's own checks (the tables) pass.
  Hello Check(const std::string& identity, Message* m, bool tables_defined);
  /// Refuses HELLO `h` from `identity` with `why` (logged; an initial rank
  /// not yet joined keeps it, to name it if the job cannot start). Returns
  /// false.
  /// `for_settings`: the peer is this job's worker, refused for a setting
  /// that differs (CheckRefusals counts it for its rank).
  bool Refuse(const std::string& identity, const MessageHeader& h, const std::string& why,
              bool for_settings = false);
  /// What an admitted HELLO made of its rank.
  struct Admission {
    int64_t start_clock = 0;    // the clock the worker starts at
    int64_t rejoin_clock = -1;  // a rejoin: the clock the rank was at
    uint64_t rejoin_samples = 0;  // a rejoin, on shard 0: the rows the rank's earlier processes trained
    bool rejoined = false;
    bool min_clock_changed = false;
  };
  /// Admits the checked HELLO of `rank` from `identity`: a first join
  /// starts at `resume_clock` (0 afresh), a rejoin or a rank beyond the
  /// initial ones at the slowest clock that counts; counted, logged, and
  /// the rank's slot starts afresh.
  Admission Admit(int rank, const std::string& identity, int64_t resume_clock);
  /// The HELLO_REPLY of admission `a` to request `h`.
  void Welcome(const std::string& identity, const MessageHeader& h, const Admission& a,
               uint64_t key_list_bytes);
  /// Whether `rank`'s HELLO waits for worker 0's.
  bool Waiting(int rank) const { return waiting_.count(rank) != 0; }
  /// The HELLOs that waited for worker 0's, in rank order, with their
  /// connections (handed back to be handled again).
  std::vector<std::pair<std::string, Message>> TakeWaiting();
  /// Refuses every waiting HELLO with `why` (this shard cannot serve).
  void RefuseWaiting(const std::string& why);
  /// Initial ranks refused so far (each told why).
  int InitialRanksRefused() const;

  // ---- BARRIER and BYE.
  /// `rank`'s BARRIER `h` from `identity`. Returns whether the min clock changed.
  bool Arrive(int rank, const std::string& identity, const MessageHeader& h);
  /// Releases the barrier once every member is at it, left or removed:
  /// each waiting worker gets the job's rows (with a coordinator, its count
  /// over every process that trained; else the BARRIERs'), the largest
  /// clock reached and, with a coordinator, the evaluator rank it fixes.
  void ReleaseBarrier(JobCoordinator* coordinator);
  /// `rank` said BYE: it no longer counts. Returns whether the min clock
  /// changed.
  bool Leave(int rank);
  /// Answers `rank`'s BYE `h` from `identity` (logged): now, or, when it
  /// finished, once the job's outcome is known (AnswerHeldByes).
  void AnswerBye(int rank, const std::string& identity, const MessageHeader& h);
  /// Answers the held BYEs: BYE_REPLY when `outcome` is OK, else its
  /// error, so that no worker of a failed job exits 0. Returns how many.
  int AnswerHeldByes(const Status& outcome);

  // ---- Silence.
  struct Silent {
    int rank = -1;  // −1: nobody past cluster.worker_timeout_ms
    int64_t silent_ms = 0;
  };
  /// The first worker silent past cluster.worker_timeout_ms at `now`
  /// (skipping those at the barrier): marked removed and told so (REMOVED,
  /// when its connection is live). Errors: Unavailable naming the worker
  /// and its clock under on_worker_timeout FAIL_JOB.
  StatusOr<Silent> NextSilent(std::chrono::steady_clock::time_point now);
  /// Marks `rank` removed for `silent_ms` of silence and tells it, as
  /// NextSilent does for the worker it finds: a replica applies its
  /// primary's decision with it (server/replica_link.h).
  Silent MarkRemoved(int rank, int64_t silent_ms);
  /// Takes the worker NextSilent marked out of the min clock (logged).
  /// Returns whether the min clock changed.
  bool RemoveSilent(const Silent& s);

  // ---- The loop's conditions.
  /// The initial ranks must join within cluster.startup_timeout_ms of the
  /// first HELLO (`any_hello`: one came), and not every one of them may be
  /// refused (CheckRefusals). Errors: FailedPrecondition (every rank
  /// refused, at once; or the job cannot run: CannotRun), DeadlineExceeded
  /// naming the ranks missing and why any was refused.
  Status CheckStartup(bool any_hello, std::chrono::steady_clock::time_point now);
  /// Logs, at the pace of WaitReport (core/wait_report.h), the initial
  /// ranks that have not joined while the shard waits for them, and how
  /// long of cluster.startup_timeout_ms has passed: from `started` (the
  /// shard's start) until the first HELLO, then from that HELLO, as the
  /// limits count. Silent once every rank joined or the job cannot run.
  void ReportJoinWait(std::chrono::steady_clock::time_point started, std::chrono::steady_clock::time_point now);
  /// Once every initial rank's worker said HELLO and was refused for its
  /// settings (none joined or waits for worker 0's; a peer of another
  /// build, job, generation or shard, or a malformed HELLO, is refused but
  /// counts for no rank):
  /// FailedPrecondition "the job cannot run: worker R (refused: WHY;
  /// connection ID); ...", naming each rank, the mismatch and the
  /// connection (a worker's holds its pid). OK otherwise.
  Status CheckRefusals() const;
  // ---- A job that cannot run.
  /// A disagreement found at start that no worker can mend: the servers
  /// were started with settings that differ (cluster.replicas and the
  /// others a copy of a shard says: server/server_replication.cc), or the
  /// workers for
  /// another cluster.num_workers (Check). Taken only while no worker has
  /// joined (returns false after: the job runs, and the caller only refuses
  /// its peer). From then on every HELLO is refused (RefuseAtStart), the
  /// waiting ones now, and CheckStartup ends the job with "the job cannot
  /// run: WHY" once every rank that may come was told (the initial ranks,
  /// or as many as a refused worker was started for), or kCannotRunLingerMs
  /// after it first looked: a rank started later would otherwise wait out
  /// its cluster.startup_timeout_ms on a port nobody serves.
  bool CannotRun(const std::string& why);
  /// Whether CannotRun was taken.
  bool cannot_run() const { return !cannot_run_.empty(); }
  /// While the job cannot run: refuses HELLO `m` from `identity` with its
  /// own mismatch of cluster.num_workers where it has one, else with the
  /// reason; a peer of another build, job or shard with its own (counted
  /// for no rank). Grows no slot (the rank may be any).
  void RefuseAtStart(const std::string& identity, const Message& m);
  /// HELLO `h` from `identity` was refused with `why` before Check (its
  /// rank past cluster.max_workers: RequestCheck): when it is this job's
  /// worker started for another cluster.num_workers, the job cannot run,
  /// as Check finds it for a rank within the job, and its rank was told.
  void RefusedBeforeCheck(const std::string& identity, const MessageHeader& h, const std::string& why);
  /// How long CheckStartup waits, once the job cannot run, for the ranks
  /// not yet told (ms).
  static constexpr int64_t kCannotRunLingerMs = 3000;

  /// Every member said BYE or was removed.
  bool AllGone() const;
  /// Workers that joined and have not left (nor been removed).
  int Staying() const;
  /// Initial ranks that have not said HELLO.
  int MissingInitial() const;
  /// The connections of the workers staying.
  std::vector<std::string> StayingIdentities() const;
  /// Whether every worker that joined finished the job (none removed).
  bool JobFinished() const;
  /// The ranks removed for silence, "1, 3" ("" for none).
  std::string Removed() const;
  /// Whether a worker's BARRIER said data on demand is DONE.
  bool AnyDataDone() const;
  /// Every request held (waiting HELLOs, BARRIERs) gets an ERROR_REPLY with
  /// `why` (as it is). Returns how many.
  int FailWaiting(const std::string& why);
  /// Ranks STATS_REPLY lists: up to the highest that took part.
  int StatsRanks() const;

  // ---- A copy of the membership (proto/shard_state.proto MembershipState:
  // a running shard's state sent to a joining replica;
  // membership_state.cc). Carried: every slot's Worker (times as ages
  // before `now`), the waiting HELLOs (as EncodeShardInput bytes), the held
  // BYEs, the first HELLO's data mode and epochs, the startup deadline and
  // the refusals it names. Not carried: the endpoint (set_endpoint, the
  // restoring process's own), the options (the restoring shard's) and a
  // CannotRun verdict (found before any worker joined, it ends the job
  // within seconds: there is no running job to copy).
  /// Writes the membership into `*state` (cleared first), as at `now`.
  void SaveState(MembershipState* state, std::chrono::steady_clock::time_point now) const;
  /// Takes `state` over a membership freshly made as the shard makes it
  /// (the same options), before any message, and after its ClockTracker's
  /// RestoreState (the tracker's slots must fit in the membership's).
  /// Times are put back as `now` − age. Errors: DataLoss naming the field
  /// ("shard state: members.workers[3].identity ...") for slots outside
  /// [initial workers, max workers], an identity over 255 bytes, an age
  /// negative or over 100 years, a waiting HELLO that does not decode, is
  /// not a HELLO, is worker 0's or out of rank order, a held BYE or a
  /// refusal of a rank outside the job's; the membership is then unusable
  /// (the caller throws it away).
  Status RestoreState(const MembershipState& state, std::chrono::steady_clock::time_point now);

 private:
  struct Parked {
    std::string identity;
    Message hello;
  };
  // Whether HELLO `h` is this job's worker where it says it is (the same
  // protocol version, job and generation, this shard): "" or why not.
  std::string CheckPeerHello(const MessageHeader& h, const std::string& who);
  // "" when HELLO `h` was started for this job's cluster.num_workers (or
  // does not say), else why not, naming both counts.
  std::string CheckJobSize(const HelloBody& h, const std::string& who) const;
  // The settings of its body that need no tables (consistency model, data
  // mode, epochs, staleness): "" or why it is refused.
  std::string CheckHelloBody(const HelloBody& h, const std::string& who, const std::string& server);
  // "" when `h`'s data digests agree with the job's (the first admitted
  // HELLO's that carried any: worker 0's, which the others wait for), on
  // every field both name; else why, naming the field.
  std::string CheckDataDigests(const HelloBody& h, const std::string& who);
  // Whether another live connection holds `rank` (refused, logged, sent).
  bool SecondClaim(const std::string& identity, Message* m, const std::string& who);
  // RestoreState's parts (membership_state.cc).
  Status RestoreWorkers(const MembershipState& state, std::chrono::steady_clock::time_point now);
  Status RestoreWaiting(const MembershipState& state);
  Status RestoreHeld(const MembershipState& state, std::chrono::steady_clock::time_point now);

  MembershipOptions options_;
  ClockTracker* clocks_;
  ServerStats* stats_;
  Outbox* outbox_;
  std::string endpoint_;
  std::vector<Worker> workers_;
  std::map<int, Parked> waiting_;  // HELLOs waiting for worker 0's, by rank
  struct HeldBye {
    std::string identity;
    uint64_t request_id = 0;
    int rank = -1;
  };
  std::vector<HeldBye> held_byes_;
  // The first admitted HELLO's train.data_on_demand and train.epochs:
  // every later HELLO that carries them must agree.
  std::optional<bool> data_on_demand_;
  std::optional<int64_t> epochs_;
  std::optional<std::string> checkpoint_dir_;  // the first admitted worker's
  // The first admitted HELLO's data digests that had any, by field.
  std::vector<std::pair<std::string, uint64_t>> data_digests_;
  // Every rank must say HELLO within cluster.startup_timeout_ms of the
  // first one (why a rank was refused is kept to name it then).
  std::optional<std::chrono::steady_clock::time_point> first_hello_;
  bool first_hello_done_ = false;  // every rank joined in time
  WaitReport join_report_;  // ReportJoinWait's, from join_since_
  std::chrono::steady_clock::time_point join_since_{};
  // Why each initial rank not joined was refused, with its connection
  // (RefusalNote).
  std::map<int, std::string> refusals_;
  // Of those, the ranks whose last refusal was of this job's worker for a
  // setting that differs (Refuse's for_settings).
  std::set<int> settings_refusals_;
  static std::string RefusalNote(const std::string& why, const std::string& identity);
  // CannotRun's reason ("" while the job may run), when CheckStartup first
  // saw it, the ranks that may come (the initial ones, or the most a
  // refused worker was started for) and those told so far.
  std::string cannot_run_;
  std::optional<std::chrono::steady_clock::time_point> cannot_run_since_;
  int ranks_to_tell_ = 0;
  std::set<int> told_;
  // Notes `rank` as told why it cannot join (a worker of this job).
  void Told(int rank);
  // HELLO `h` from `identity` was refused with `why`, a cluster.num_workers
  // that differs: told, its count's ranks to tell, and the job cannot run.
  void JobSizeDiffers(const std::string& identity, const MessageHeader& h, const std::string& why);
  // CheckStartup's part once the job cannot run.
  Status CheckCannotRun(std::chrono::steady_clock::time_point now);
  // "worker R (refused: WHY); ..." over refusals_.
  std::string RefusedRanks() const;
};

}  // namespace tether
