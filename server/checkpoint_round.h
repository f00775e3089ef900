// CheckpointRound: this shard's part of a checkpoint (server/table_checkpoint.h
// writes the file; checkpoint/ holds the formats), and the resume from one.
//
// A checkpoint is a consistent cut at clock c (docs/OPERATIONS.md): each
// worker sends CHECKPOINT on reaching c, and once every worker still
// training here has (one that finished, left or was removed has nothing
// more to apply), the shard writes shard-<s>.tables in one turn of its
// event loop and answers them all with the file's name, size and checksum
// (and, from the job coordinator's shard, chunks.state and the manifest's
// rank entries). A round that cannot complete (a rank whose process started
// at or past the cut never sends its state for it) is abandoned: the
// waiting workers are told and train on, and the folder never gets a
// MANIFEST.
//
// Resume: worker 0's HELLO (or tether-server --resume_from) names the
// checkpoint; this shard loads its rows, and every worker starts at its
// clock. A shard that cannot load its part records why (load_failed()):
// it then refuses every HELLO with that reason.
//
// State (SaveState/RestoreState, proto/shard_state.proto
// CheckpointRoundState), carried to a replica that joins a running shard:
// the round in progress (its clock, final flag, folder, the workers waiting
// with their connection and request id, their state files), the last and
// the resumed clock, --resume_from, and a failed load (its status, why and
// when) or fatal error. Not carried: set_writes_files, the copy's own
// setting (a copy's round writes no files, EndRoundUnwritten).
//
// Ownership: the shard owns it; the rooms it is given (KvService,
// ClockTracker, Membership, the coordinator or null, Outbox, ServerStats)
// are the shard's and outlive it. Thread-safety: none (Run()'s thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "checkpoint/checkpoint.h"
#include "core/status.h"
#include "proto/checkpoint.pb.h"
#include "proto/shard_state.pb.h"
#include "proto/wire.pb.h"
#include "server/clock_tracker.h"
#include "server/coordinator/job_coordinator.h"
#include "server/kept_model.h"
#include "server/kv_service.h"
#include "server/membership.h"
#include "core/net/outbox.h"
#include "server/shard_stats.h"

namespace tether {

class CheckpointRound {
 public:
  /// The rooms a round reads and writes (all the shard's).
  struct Rooms {
    KvService* kv = nullptr;
    ClockTracker* clocks = nullptr;
    Membership* members = nullptr;
    JobCoordinator* coordinator = nullptr;  // null on a shard without one
    KeptModel* kept = nullptr;              // the best epoch's weights (shard-<s>.kept)
  };

  CheckpointRound(int shard, int num_shards, const Rooms& rooms, ServerStats* stats, Outbox* outbox);

  /// The checkpoint this shard resumes from on its own host (tether-server
  /// --resume_from: a checkpoint or a directory of them); "" for worker 0's.
  void set_resume_from(const std::string& path) { resume_from_ = path; }
  /// false: this round belongs to a copy of the shard that replays its
  /// primary's inputs (ServerShard::Replay). Each round then ends at the cut
  /// as the primary's does, with the same bookkeeping (the coordinator's
  /// round, the last clock), and writes no file: the primary writes them.
  void set_writes_files(bool writes) { writes_files_ = writes; }
  /// Whether worker 0's HELLO `h` starts a resumed job here.
  bool Resuming(const HelloBody& h) const { return !h.resume_from().empty() || !resume_from_.empty(); }

  /// A worker's CHECKPOINT `h` from `identity` joins the round at its clock
  /// (one of another clock or folder while a round is open is refused),
  /// then MaybeWrite.
  void Join(const std::string& identity, const MessageHeader& h);
  /// Writes the round once every counting worker joined it, or abandons it
  /// when one never can. Call after anything that changes who counts.
  void MaybeWrite();

  /// Worker 0's HELLO `h` of a resumed job: defines the tables (h.tables),
  /// loads this shard's rows, hands the coordinator its part, and starts
  /// every rank at the checkpoint's clock. Returns "" or why the HELLO is
  /// refused (a failed load is also recorded: load_failed()).
  std::string Resume(const HelloBody& h);

  /// The clock this shard resumed at, or −1.
  int64_t resume_clock() const { return resume_clock_; }
  /// The latest checkpoint's clock (written, failed, or resumed from), or −1.
  int64_t last_clock() const { return last_clock_; }
  /// Set when this shard could not load its part of the checkpoint: the
  /// error Run() ends with, the refusal every HELLO gets, and when.
  const Status& load_failed() const { return load_failed_; }
  const std::string& load_failed_why() const { return load_failed_why_; }
  std::chrono::steady_clock::time_point load_failed_at() const { return load_failed_at_; }
  /// Set when the checkpoint's chunks.state could not be read: the job
  /// cannot go on (Run() ends with it).
  const Status& fatal() const { return fatal_; }

  /// The round's state into `*state` (cleared first); times as ages
  /// before `now`.
  void SaveState(CheckpointRoundState* state, std::chrono::steady_clock::time_point now) const;
  /// Replaces the round's state with `state` (a network peer's: untrusted),
  /// ages back relative to `now`, on a round made as the shard makes it,
  /// after the membership's state is restored (ranks are checked against
  /// its slots). Clocks are taken as they are (a worker's CHECKPOINT may
  /// name any clock). Errors: DataLoss naming the field ("shard state:
  /// round.waiting[1].rank ...") for a rank outside Membership::slots,
  /// ranks not ascending, a negative age, a status code that is no error.
  [[nodiscard]] Status RestoreState(const CheckpointRoundState& state, std::chrono::steady_clock::time_point now);

 private:
  struct Round {
    int64_t clock = -1;  // −1: none in progress
    bool final = false;
    std::string dir;
    std::map<int, std::pair<std::string, uint64_t>> waiting;  // rank → identity, request id
    std::map<int, CheckpointFile> files;                       // rank → its state file
  };
  // "" when the round can still complete, else why it cannot.
  std::string WhyItCannotComplete() const;
  // Writes this shard's part (and the coordinator's chunks.state) and
  // answers every worker waiting at the round.
  void Write();
  // Write() for a round that writes no files (set_writes_files(false)).
  void EndRoundUnwritten();
  // Answers every waiting worker that the round is abandoned, and why.
  void AnswerAbandoned(const std::string& why);
  void Abandon(const std::string& why);
  // The coordinator's chunks.state into the round's folder, when chunks are
  // being dealt (*written keeps no name otherwise).
  Status WriteChunkState(CheckpointFile* written);
  // The checkpoint's clock and chunks.state to the coordinator ("" or why
  // the resume is refused).
  std::string ResumeCoordinator(const std::string& dir, const CheckpointManifest& m);
  // Records that this shard could not load its checkpoint; returns `why`.
  std::string LoadFailed(const std::string& why);
  // RestoreState's part for the round in progress.
  Status RestoreRound(const CheckpointRoundState& state);

  int shard_, num_shards_;
  Rooms rooms_;
  ServerStats* stats_;
  Outbox* outbox_;
  Round round_;
  bool writes_files_ = true;
  int64_t last_clock_ = -1;
  int64_t resume_clock_ = -1;
  std::string resume_from_;
  Status load_failed_;
  std::string load_failed_why_;
  std::chrono::steady_clock::time_point load_failed_at_;
  Status fatal_;
};

}  // namespace tether
