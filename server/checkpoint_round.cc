#include "server/checkpoint_round.h"

#include <glog/logging.h>

#include <algorithm>
#include <optional>

#include "checkpoint/chunk_state.h"
#include "core/env.h"
#include "server/kept_model_checkpoint.h"
#include "server/table_budget_checkpoint.h"
#include "server/table_checkpoint.h"

namespace tether {
namespace {

using SteadyClock = std::chrono::steady_clock;

Status Bad(const std::string& field, const std::string& what) {
  return Status::DataLoss("shard state: round." + field + " " + what);
}

std::string At(const std::string& name, int i) { return name + "[" + std::to_string(i) + "]"; }

void SaveStatus(const Status& st, CheckpointRoundStatus* out) {
  out->set_code(static_cast<int32_t>(st.code()));
  out->set_message(st.message());
}

// The error `s` names; nullopt for kOk or a code Status does not have.
std::optional<Status> ErrorOf(const CheckpointRoundStatus& s) {
  const std::string& m = s.message();
  switch (static_cast<Status::Code>(s.code())) {
    case Status::Code::kInvalidArgument: return Status::InvalidArgument(m);
    case Status::Code::kNotFound: return Status::NotFound(m);
    case Status::Code::kIOError: return Status::IOError(m);
    case Status::Code::kDataLoss: return Status::DataLoss(m);
    case Status::Code::kDeadlineExceeded: return Status::DeadlineExceeded(m);
    case Status::Code::kFailedPrecondition: return Status::FailedPrecondition(m);
    case Status::Code::kUnavailable: return Status::Unavailable(m);
    case Status::Code::kInternal: return Status::Internal(m);
    case Status::Code::kResourceExhausted: return Status::ResourceExhausted(m);
    default: return std::nullopt;
  }
}

}  // namespace

CheckpointRound::CheckpointRound(int shard, int num_shards, const Rooms& rooms, ServerStats* stats, Outbox* outbox)
    : shard_(shard), num_shards_(num_shards), rooms_(rooms), stats_(stats), outbox_(outbox) {}

void CheckpointRound::Join(const std::string& identity, const MessageHeader& h) {
  const int rank = h.sender_rank();
  const CheckpointBody& body = h.checkpoint();
  if (round_.clock < 0) {
    round_.clock = body.clock();
    round_.final = body.is_final();
    round_.dir = body.dir();
  } else if (body.clock() != round_.clock || body.dir() != round_.dir) {
    ++stats_->bad_messages;
    outbox_->SendError(identity, h,
                       "CHECKPOINT from worker " + std::to_string(rank) + " at clock " +
                           std::to_string(body.clock()) + " (" + body.dir() + ") while the one at clock " +
                           std::to_string(round_.clock) + " (" + round_.dir + ") is in progress");
    return;
  }
  round_.waiting[rank] = {identity, h.request_id()};
  if (body.has_state_file()) round_.files[rank] = body.state_file();
  MaybeWrite();
}

std::string CheckpointRound::WhyItCannotComplete() const {
  // A rank whose process started at or past the cut (restarted by hand or
  // joined while the round was pending) never sends its state for it: a
  // worker takes a checkpoint only on reaching a clock, and the HELLO can
  // reach one shard before or after the round's first CHECKPOINT, or name
  // a lower clock than the worker then runs at (it passes the cut without
  // a CHECKPOINT). A final round waits for whoever is still training.
  if (round_.final) return "";
  const ClockTracker& clocks = *rooms_.clocks;
  for (int r = 0; r < clocks.num_workers(); ++r) {
    if (!clocks.Counts(r) || round_.waiting.count(r) > 0) continue;
    const int64_t joined = rooms_.members->worker(r).joined_clock;
    if (joined < round_.clock && clocks.clock(r) <= round_.clock) continue;
    return "worker " + std::to_string(r) + " was restarted before it wrote its state (its process started at clock " +
           std::to_string(joined) + ")";
  }
  return "";
}

void CheckpointRound::MaybeWrite() {
  if (round_.clock < 0) return;
  if (const std::string why = WhyItCannotComplete(); !why.empty()) {
    Abandon(why);
    return;
  }
  // Every worker still training must be at the cut; one that has finished
  // (barrier), left or was removed has nothing more to apply.
  const ClockTracker& clocks = *rooms_.clocks;
  for (int r = 0; r < clocks.num_workers(); ++r)
    if (clocks.Counts(r) && round_.waiting.count(r) == 0) return;
  Write();
}

void CheckpointRound::Write() {
  if (!writes_files_) return EndRoundUnwritten();
  const auto start = SteadyClock::now();
  CheckpointFile file;
  // The manifest is written by the lowest rank in the round
  // (ManifestWriterRank): worker 0 when it is still training, else the
  // next one, so a cut after worker 0 finished its share (or left) is
  // still completed.
  Status st = !rooms_.kv->defined() ? Status::FailedPrecondition("no tables defined yet")
                                    : WriteShardCheckpoint(FileSystem::Default(), round_.dir, shard_, num_shards_,
                                                           round_.clock, rooms_.kv->tables(), &file);
  // Data on demand: the coordinator's dealing state, in this same turn of
  // the loop as the rows (checkpoint/chunk_state.h says why the two agree).
  CheckpointFile chunk_file, budget_file, kept_file;
  if (st.ok()) st = WriteChunkState(&chunk_file);
  // Tables within a budget: their sketches, eviction metadata and counters.
  if (st.ok())
    st = WriteShardBudgetState(FileSystem::Default(), round_.dir, shard_, num_shards_, round_.clock,
                               rooms_.kv->tables(), &budget_file);
  // The best epoch's weights held for train.keep_best_model: a resume keeps
  // the epoch the uninterrupted run keeps.
  if (st.ok() && rooms_.kept != nullptr)
    st = WriteKeptModelFile(FileSystem::Default(), round_.dir, shard_, num_shards_, round_.clock, *rooms_.kept,
                            rooms_.kv->tables(), &kept_file);
  const double seconds = std::chrono::duration<double>(SteadyClock::now() - start).count();
  const std::string& prefix = outbox_->log_prefix();
  if (st.ok()) {
    LOG(INFO) << prefix << "checkpoint at clock " << round_.clock << (round_.final ? " (final)" : "") << ": "
              << round_.dir << "/" << file.name() << ", " << file.bytes() / 1e6 << " MB in " << seconds << " s ("
              << file.bytes() / 1e6 / std::max(seconds, 1e-9) << " MB/s)";
  } else {
    LOG(ERROR) << prefix << "checkpoint at clock " << round_.clock << " failed: " << st.message();
  }
  for (const auto& [rank, peer] : round_.waiting) {
    MessageHeader req;
    req.set_request_id(peer.second);
    req.set_sender_rank(rank);
    if (!st.ok()) {
      outbox_->SendError(peer.first, req, "checkpoint at clock " + std::to_string(round_.clock) + ": " + st.message());
      continue;
    }
    Message reply;
    reply.header.set_type(CHECKPOINT_REPLY);
    reply.header.set_request_id(peer.second);
    CheckpointReplyBody& body = *reply.header.mutable_checkpoint_reply();
    body.set_clock(round_.clock);
    *body.add_files() = file;
    if (chunk_file.has_name()) *body.add_files() = chunk_file;
    if (budget_file.has_name()) *body.add_files() = budget_file;
    if (kept_file.has_name()) *body.add_files() = kept_file;
    if (rooms_.coordinator != nullptr) rooms_.coordinator->ManifestEntries(round_.files, body.mutable_workers());
    outbox_->Send(peer.first, &reply, rank);
  }
  // Ranks here now have their state in this checkpoint; worker 0 copies
  // those that left into it too, so it holds every rank's place.
  if (rooms_.coordinator != nullptr) rooms_.coordinator->RoundEnded(round_.clock, st.ok(), round_.dir, round_.files);
  last_clock_ = std::max(last_clock_, round_.clock);
  round_ = Round();
  // The write held the event loop: nobody was silent meanwhile.
  rooms_.members->SeenAll();
}

void CheckpointRound::EndRoundUnwritten() {
  // What Write() does after the files: the state a replaying copy keeps
  // equals its primary's. Its answers (its outbox is muted, its reply cache
  // keeps them, server/reply_cache.h) abandon the round: should the copy
  // claim the shard, a worker that sends this CHECKPOINT again had no
  // answer from the primary, whose files the copy cannot vouch for, and
  // the folder must get no MANIFEST.
  AnswerAbandoned("shard " + std::to_string(shard_) + " failed over while its primary wrote its files");
  if (rooms_.coordinator != nullptr) rooms_.coordinator->RoundEnded(round_.clock, true, round_.dir, round_.files);
  last_clock_ = std::max(last_clock_, round_.clock);
  round_ = Round();
}

void CheckpointRound::AnswerAbandoned(const std::string& why) {
  for (const auto& [rank, peer] : round_.waiting) {
    Message reply;
    reply.header.set_type(CHECKPOINT_REPLY);
    reply.header.set_request_id(peer.second);
    CheckpointReplyBody& body = *reply.header.mutable_checkpoint_reply();
    body.set_clock(round_.clock);
    body.set_abandoned(true);
    body.set_abandoned_why("checkpoint at clock " + std::to_string(round_.clock) + " abandoned: " + why);
    outbox_->Send(peer.first, &reply, rank);
  }
}

void CheckpointRound::Abandon(const std::string& why) {
  LOG(WARNING) << outbox_->log_prefix() << "checkpoint at clock " << round_.clock << " abandoned: " << why << "; "
               << round_.dir << " stays incomplete (no MANIFEST, never resumed from); training goes on";
  AnswerAbandoned(why);
  if (rooms_.coordinator != nullptr) rooms_.coordinator->RoundAbandoned(round_.clock);
  round_ = Round();
}

Status CheckpointRound::WriteChunkState(CheckpointFile* written) {
  ChunkCoordinatorState state;
  if (rooms_.coordinator == nullptr || !rooms_.coordinator->ChunkState(round_.clock, &state)) return Status::OK();
  TETHER_RETURN_IF_ERROR(tether::WriteChunkState(FileSystem::Default(), round_.dir, state, written));
  const std::string& prefix = outbox_->log_prefix();
  if (state.completed_epochs() >= state.epochs()) {
    LOG(INFO) << prefix << "checkpoint at clock " << round_.clock << ": data on demand, all " << state.epochs()
              << " epochs' chunks completed: " << round_.dir << "/" << kChunkStateName;
    return Status::OK();
  }
  LOG(INFO) << prefix << "checkpoint at clock " << round_.clock << ": data on demand at epoch "
            << state.completed_epochs() + 1 << " of " << state.epochs() << ", "
            << (state.open_size() > 0 ? state.open(0).completed_size() : 0) << " chunk(s) of it completed, "
            << (state.open_size() > 0 ? state.open(0).held_size() : 0)
            << " dealt and not completed (dealt again on a resume): " << round_.dir << "/" << kChunkStateName;
  return Status::OK();
}

std::string CheckpointRound::LoadFailed(const std::string& why) {
  load_failed_ = Status::DataLoss(outbox_->log_prefix() + why);
  load_failed_why_ = why;
  load_failed_at_ = SteadyClock::now();
  return why;
}

std::string CheckpointRound::Resume(const HelloBody& h) {
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
  rooms_.kv->DefineTables(h.tables());
  Status st = RestoreShardTables(dir, *m, shard_, num_shards_, &rooms_.kv->tables());
  if (st.ok()) st = RestoreShardBudgetState(dir, *m, shard_, num_shards_, &rooms_.kv->tables());
  if (st.ok() && rooms_.kept != nullptr)
    st = RestoreKeptModel(dir, *m, shard_, num_shards_, rooms_.kv->tables(), rooms_.kept);
  if (!st.ok()) {
    return LoadFailed("cannot resume: server " + std::to_string(shard_) + " failed to load its part of " + dir + ": " +
                      st.message());
  }
  if (const std::string why = ResumeCoordinator(dir, *m); !why.empty()) return why;
  resume_clock_ = m->clock();
  last_clock_ = m->clock();
  ClockTracker& clocks = *rooms_.clocks;
  for (int r = 0; r < clocks.num_workers(); ++r) clocks.Rejoin(r, resume_clock_);
  uint64_t rows = 0;
  for (const auto& t : rooms_.kv->tables()) rows += t->num_rows();
  LOG(INFO) << outbox_->log_prefix() << "resumed from " << dir << " (clock " << resume_clock_ << ", written by "
            << m->num_servers() << " server(s) and " << m->num_workers() << " worker(s)): " << rows << " rows in "
            << std::chrono::duration<double>(SteadyClock::now() - start).count() << " s";
  return "";
}

std::string CheckpointRound::ResumeCoordinator(const std::string& dir, const CheckpointManifest& m) {
  if (rooms_.coordinator == nullptr) return "";
  StatusOr<std::optional<ChunkCoordinatorState>> state = ReadChunkState(dir, m);
  if (!state.ok()) {
    fatal_ = state.status();
    return "cannot resume: " + state.status().message();
  }
  if (Status st = rooms_.coordinator->Resumed(m.clock(), std::move(*state)); !st.ok())
    return "cannot resume: " + st.message();
  return "";
}

void CheckpointRound::SaveState(CheckpointRoundState* state, SteadyClock::time_point now) const {
  state->Clear();
  state->set_clock(round_.clock);
  state->set_final(round_.final);
  state->set_dir(round_.dir);
  for (const auto& [rank, peer] : round_.waiting) {
    CheckpointRoundWaiting* w = state->add_waiting();
    w->set_rank(rank);
    w->set_identity(peer.first);
    w->set_request_id(peer.second);
  }
  for (const auto& [rank, file] : round_.files) {
    CheckpointRoundState::File* f = state->add_files();
    f->set_rank(rank);
    *f->mutable_file() = file;
  }
  state->set_last_clock(last_clock_);
  state->set_resume_clock(resume_clock_);
  state->set_resume_from(resume_from_);
  if (!load_failed_.ok()) {
    SaveStatus(load_failed_, state->mutable_load_failed());
    state->set_load_failed_why(load_failed_why_);
    state->set_load_failed_age_ns(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::nanoseconds>(now - load_failed_at_).count()));
  }
  if (!fatal_.ok()) SaveStatus(fatal_, state->mutable_fatal());
}

Status CheckpointRound::RestoreState(const CheckpointRoundState& state, SteadyClock::time_point now) {
  TETHER_RETURN_IF_ERROR(RestoreRound(state));
  last_clock_ = state.last_clock();
  resume_clock_ = state.resume_clock();
  resume_from_ = state.resume_from();
  load_failed_ = Status::OK();
  load_failed_why_.clear();
  load_failed_at_ = SteadyClock::time_point();
  if (state.has_load_failed()) {
    std::optional<Status> failed = ErrorOf(state.load_failed());
    if (!failed) return Bad("load_failed.code", std::to_string(state.load_failed().code()) + " is no error's code");
    if (state.load_failed_age_ns() < 0)
      return Bad("load_failed_age_ns", std::to_string(state.load_failed_age_ns()) + " is negative");
    load_failed_ = *std::move(failed);
    load_failed_why_ = state.load_failed_why();
    load_failed_at_ = now - std::chrono::nanoseconds(state.load_failed_age_ns());
  }
  fatal_ = Status::OK();
  if (state.has_fatal()) {
    std::optional<Status> fatal = ErrorOf(state.fatal());
    if (!fatal) return Bad("fatal.code", std::to_string(state.fatal().code()) + " is no error's code");
    fatal_ = *std::move(fatal);
  }
  return Status::OK();
}

Status CheckpointRound::RestoreRound(const CheckpointRoundState& state) {
  const int slots = rooms_.members->slots();
  round_ = Round();
  round_.clock = state.clock();
  round_.final = state.final();
  round_.dir = state.dir();
  const auto rank_ok = [slots](int32_t rank, int i, int32_t before) {
    return rank >= 0 && rank < slots && (i == 0 || rank > before);
  };
  for (int i = 0; i < state.waiting_size(); ++i) {
    const CheckpointRoundWaiting& w = state.waiting(i);
    if (!rank_ok(w.rank(), i, i > 0 ? state.waiting(i - 1).rank() : 0))
      return Bad(At("waiting", i) + ".rank", std::to_string(w.rank()) + " is not a rank of the " +
                                                 std::to_string(slots) + " slots above the one before it");
    round_.waiting[w.rank()] = {w.identity(), w.request_id()};
  }
  for (int i = 0; i < state.files_size(); ++i) {
    const CheckpointRoundState::File& f = state.files(i);
    if (!rank_ok(f.rank(), i, i > 0 ? state.files(i - 1).rank() : 0))
      return Bad(At("files", i) + ".rank", std::to_string(f.rank()) + " is not a rank of the " +
                                               std::to_string(slots) + " slots above the one before it");
    round_.files[f.rank()] = f.file();
  }
  return Status::OK();
}

}  // namespace tether
