#include "worker/train/checkpointer.h"

#include <chrono>
#include <filesystem>

#include <glog/logging.h>

#include "core/config.h"
#include "core/file_util.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/residual_file.h"
#include "worker/train/job_outcome.h"
#include "worker/trainer.h"

namespace tether {
namespace {

using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

// The wall clock, seconds since the Unix epoch (the manifest's time).
double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

Checkpointer::Checkpointer(const JobConfig& config, int rank, int num_servers, std::vector<TableSpec> tables,
                           WorkerClient* client, JobSession* session, const DataWatch* data, bool* input_refused)
    : config_(config),
      rank_(rank),
      num_servers_(num_servers),
      tables_(std::move(tables)),
      client_(client),
      session_(session),
      data_(data),
      input_refused_(input_refused),
      who_("[worker " + std::to_string(rank) + "] ") {}

Status Checkpointer::CheckData(const std::string& when) const {
  // A changed file is bad input, as at an epoch's end: a restart would
  // read it again.
  const Status st = data_->Check(when);
  if (st.ok()) return st;
  if (input_refused_ != nullptr) *input_refused_ = true;
  return Status::FailedPrecondition(who_ + st.message());
}

Status Checkpointer::WriteManifest(const std::string& dir, int64_t clock, bool final, const CheckpointReply& reply) {
  CheckpointManifest m;
  m.set_format_version(kCheckpointFormatVersion);
  m.set_job_id(JobId(config_));
  m.set_generation(config_.cluster().generation());
  m.set_clock(clock);
  m.set_final(final);
  m.set_num_servers(num_servers_);
  m.set_num_workers(config_.cluster().num_workers());
  for (const TableSpec& t : tables_) *m.add_tables() = t;
  *m.mutable_config() = config_;
  data_->Record(&m);  // checked unchanged just before this checkpoint
  for (const CheckpointFile& f : reply.shard_files) *m.add_files() = f;
  for (const CheckpointFile& f : reply.extra_files) *m.add_files() = f;  // shard 0's chunks.state
  for (const CheckpointWorker& w : reply.workers) {
    CheckpointWorker* e = m.add_workers();
    *e = w;
    if (w.kind() == CheckpointWorker::LEFT) {
      // A worker that left: its state at its last checkpoint comes along,
      // so a resume trains the rows it had left (docs/OPERATIONS.md).
      if (w.from_dir() != dir)
        TETHER_RETURN_IF_ERROR(CopyWorkerFiles(FileSystem::Default(), w.from_dir(), dir, w.file()));
      e->clear_from_dir();
    }
    if (w.kind() == CheckpointWorker::TRAINING || w.kind() == CheckpointWorker::LEFT) *m.add_files() = w.file();
  }
  m.set_written_unix_s(UnixSeconds());
  TETHER_RETURN_IF_ERROR(tether::WriteManifest(FileSystem::Default(), dir, m));
  return PruneCheckpoints(FileSystem::Default(), config_.checkpoint().dir(), config_.checkpoint().keep_last());
}

StatusOr<bool> Checkpointer::Take(WorkerState state, TrainReport* report) {
  const auto t0 = SteadyClock::now();
  const int64_t clock = client_->clock();
  // Never into a complete checkpoint of this clock (a resumed job reaching
  // one written before): every worker sees the same directory.
  const std::string dir = FreeCheckpointDir(config_.checkpoint().dir(), clock, false);
  // A checkpoint's places are rows of the files read: never of changed ones.
  TETHER_RETURN_IF_ERROR(CheckData("before the checkpoint at clock " + std::to_string(clock)));
  state.set_rank(rank_);
  state.set_num_workers(config_.cluster().num_workers());
  state.set_clock(clock);
  // Error-feedback residuals go beside the state, which records the file:
  // a resume pushes what this run would have pushed.
  if (std::vector<ResidualTable> residuals = client_->push_encoder().SaveResiduals(); !residuals.empty())
    TETHER_RETURN_IF_ERROR(
        WriteResidualFile(FileSystem::Default(), dir, rank_, residuals, state.mutable_residual_file()));
  CheckpointFile mine;
  TETHER_RETURN_IF_ERROR(WriteWorkerState(FileSystem::Default(), dir, state, &mine));
  TETHER_ASSIGN_OR_RETURN(CheckpointReply reply, session_->Checkpoint(dir, /*final=*/false, &mine));
  if (reply.abandoned) {
    // A worker was restarted at or past this clock and never sends its
    // state: the folder stays without a MANIFEST (never resumed from), and
    // the next checkpoint (or a stop's new request) is taken as usual.
    report->checkpoint_seconds += SecondsSince(t0);
    LOG(WARNING) << who_ << reply.abandoned_why << " (" << dir << " has no MANIFEST); training goes on";
    return false;
  }
  // Worker 0 while it trains; once it has finished its share (or left),
  // the lowest rank in the cut (ManifestWriterRank).
  const bool writer = ManifestWriterRank(reply.workers) == rank_;
  if (writer) TETHER_RETURN_IF_ERROR(WriteManifest(dir, clock, false, reply));
  const double pause = SecondsSince(t0);
  report->checkpoint_seconds += pause;
  ++report->checkpoints;
  report->last_checkpoint = dir;
  LOG(INFO) << who_ << "checkpoint at clock " << clock << (writer ? " written: " : ": ") << dir << " (" << pause
            << " s of training paused)";
  return true;
}

StatusOr<std::string> Checkpointer::TakeFinal(const CheckpointManifest& resumed, const std::string& resume_dir,
                                              bool dealt_by_shard0, TrainReport* report) {
  const std::string& parent = config_.checkpoint().dir();
  const auto t0 = SteadyClock::now();
  const int64_t clock = session_->final_checkpoint_clock();  // the shards write their files at it too
  std::string dir = FreeCheckpointDir(parent, clock, true);
  const std::string same = CheckpointJoinPath(parent, CheckpointDirName(clock, true));
  std::error_code same_ec;
  if (ResumedFinalStays(resumed, clock,
                        std::filesystem::equivalent(std::filesystem::path(resume_dir).parent_path(), parent,
                                                    same_ec))) {
    // Resumed from a final checkpoint of this clock in checkpoint.dir:
    // every worker had finished and nothing was trained since, so it
    // already is this job's final one.
    LOG(INFO) << who_ << "the job resumed from the final checkpoint " << resume_dir
              << " and trained nothing since: it stays the final checkpoint (not written again)";
    report->last_checkpoint = resume_dir;
    return std::string();
  }
  if (dir != same)
    LOG(WARNING) << who_ << same << " already holds a complete checkpoint (written before this job resumed): "
                 << "the final checkpoint goes to " << dir << " instead of over it";
  TETHER_RETURN_IF_ERROR(CheckData("before the final checkpoint at clock " + std::to_string(clock)));
  TETHER_ASSIGN_OR_RETURN(CheckpointReply reply, session_->Checkpoint(dir, /*final=*/true, nullptr));
  // Workers that left before the end: the job did not finish. The
  // checkpoint keeps their places (LEFT) and is not a final one, so a
  // resume trains what they left; the run then ends in an error.
  const std::string left = RanksLeftBeforeEnd(reply.workers);
  const bool final = FinalCheckpointIsFinal(left, dealt_by_shard0);
  if (!final) {
    const std::string plain = FreeCheckpointDir(parent, clock, false);
    std::error_code ec;
    if (!std::filesystem::exists(plain, ec) && (std::filesystem::rename(dir, plain, ec), !ec)) dir = plain;
  }
  TETHER_RETURN_IF_ERROR(WriteManifest(dir, clock, final, reply));
  ++report->checkpoints;
  report->last_checkpoint = dir;
  if (final) {
    LOG(INFO) << who_ << "final checkpoint written: " << dir << " (" << SecondsSince(t0) << " s)";
    return std::string();
  }
  const std::string incomplete = "the job did not finish: worker(s) " + left +
                                 " left before the end of training; their places are in " + dir +
                                 ": resume with --resume_from=" + parent + " to train the rows they left";
  LOG(ERROR) << who_ << incomplete;
  return incomplete;
}

}  // namespace tether
