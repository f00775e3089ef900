// The run's epochs: blocks of rows from the row source, trained in
// minibatches (pull, compute, push), a CLOCK every minibatches_per_clock,
// and between minibatches the checkpoints and stops.
#include "worker/train/training_run.h"

#include <algorithm>
#include <cmath>

#include <glog/logging.h>

#include "core/config.h"
#include "telemetry/progress_eta.h"

namespace tether {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

double TrainingRun::TrainSeconds() const { return SecondsSince(train_start_) - eval_seconds_; }

double TrainingRun::IdleSeconds() const { return source_->wait_seconds() + eval_seconds_; }

void TrainingRun::PublishProgress(int epoch_1based) {
  // tether-worker's /metrics (TrainerOptions::on_progress).
  if (!options_.on_progress) return;
  progress_now_.client = client_->stats();
  progress_now_.clock = client_->clock();
  progress_now_.epoch = epoch_1based;
  progress_now_.samples = report_.samples;
  progress_now_.run_samples = report_.samples - start_.samples;
  progress_now_.train_seconds = TrainSeconds();
  progress_now_.pull_wait_seconds = pull_wait_;
  options_.on_progress(progress_now_);
}

Status TrainingRun::Train() {
  report_.epochs_trained = start_.epoch;
  for (int epoch = start_.epoch; epoch < config_.train().epochs(); ++epoch) {
    TETHER_RETURN_IF_ERROR(TrainEpoch(epoch));
    if (left_) return Status::OK();
    report_.epochs_trained = epoch + 1;
    // Every worker merged the same validation figures, so every worker
    // stops after the same epoch. Patience that runs out with the last
    // epoch stops nothing: every epoch was trained.
    if (validation_ != nullptr && epoch + 1 < config_.train().epochs() && validation_->ShouldStop()) {
      report_.stopped_early = true;
      LOG(INFO) << who_ << "early stopping after epoch " << epoch + 1 << " of " << config_.train().epochs() << ": "
                << validation_->metric() << " on the validation split was best at epoch "
                << validation_->best_epoch();
      break;
    }
  }
  if (ReportsRecordedValidation()) {
    // Resumed with nothing left to train: the finished run's outcome.
    ReportOutcome(start_.validation, &report_);
  } else if (validation_ != nullptr) {
    report_.validation_rows = validation_->best().rows;
    report_.validation_metric = validation_->metric();
    report_.best_epoch = validation_->best_epoch();
    report_.validation_metrics = validation_->best().metrics;
  }
  if (minibatches_ % per_clock_ != 0) TETHER_RETURN_IF_ERROR(client_->Clock());
  return Status::OK();
}

Status TrainingRun::TrainEpoch(int epoch) {
  feed_epoch_ = epoch;
  const uint64_t samples_from = report_.samples;
  // The run's first epoch continues where a resume or a restart left it.
  const bool first = epoch == start_.epoch;
  loss_sum_ = first ? start_.loss_sum : 0;
  loss_batches_ = first ? start_.loss_batches : 0;
  // A streamed share is read here, every epoch: its errors are its lines'.
  const bool streamed = data_.mode == TrainingData::Mode::kStreamed;
  if (Status st = source_->StartEpoch(epoch, first ? start_.row : 0); !st.ok())
    return streamed ? NoteInput(st) : st;
  // One block at a time (the whole share, a streamed block, a chunk); the
  // next minibatch starts where the last one ended: its size may change at
  // a clock (adaptive batch sizes).
  CsrMatrix x, y;
  int64_t b = 0;
  for (;;) {
    StatusOr<bool> more = source_->NextBlock(&x, &y, &b);
    if (!more.ok()) return streamed ? NoteInput(more.status()) : more.status();
    if (!*more) break;
    while (b < x.rows) {
      // With checkpoints on, leave after a checkpoint, so the job resumes
      // from here; without, at once.
      if (NoticeStop() && stop_->LeavesAtOnce()) {
        Leave();
        return Status::OK();
      }
      const Minibatch batch{&x, &y, b, AdaptiveBatchEnd(adaptive_, x.rows, b, bs_)};
      b = batch.end;
      float loss = 0;
      TETHER_RETURN_IF_ERROR(TrainMinibatch(batch, &loss));
      if (minibatches_ % per_clock_ == 0) {
        TETHER_RETURN_IF_ERROR(EndClock(epoch, batch, loss));
        if (left_) return Status::OK();
      }
    }
  }
  if (source_->stopped()) {
    LeaveStoppedFeed();
    return Status::OK();
  }
  return EndEpoch(epoch, samples_from);
}

Status TrainingRun::TrainMinibatch(const Minibatch& batch, float* loss) {
  const auto pull_start = SteadyClock::now();
  TETHER_RETURN_IF_ERROR(model_->Pull(batch, client_.get()));
  pull_wait_ += SecondsSince(pull_start);
  // train.pipeline (Model::Pipelines): the next minibatch of this block
  // starts arriving while this one computes, read at its own clock.
  const bool pipelined = model_->Pipelines();
  const int64_t rows = batch.features->rows;
  if (pipelined && batch.end < rows) {
    const int64_t next_clock = client_->clock() + ((minibatches_ + 1) % per_clock_ == 0 ? 1 : 0);
    TETHER_RETURN_IF_ERROR(model_->Prefetch(
        Minibatch{batch.features, batch.labels, batch.end, std::min(rows, batch.end + bs_)}, next_clock,
        client_.get()));
  }
  TETHER_ASSIGN_OR_RETURN(*loss,
                          pipelined ? model_->ComputeAndPush(batch, client_.get()) : model_->ComputeGradients(batch));
  if (minibatches_ == 0) first_loss_ = *loss;
  loss_sum_ += *loss;
  ++loss_batches_;
  if (adaptive_.enabled()) {
    // The gradients are means over the batch: a push of b rows steps
    // b / B as far as one of the mean size B (AdaptiveBatchConfig).
    const float w = static_cast<float>(batch.rows()) / static_cast<float>(config_.train().minibatch_size());
    if (adaptive_.step_scaling() == AdaptiveBatchConfig::LINEAR) client_->SetPushScaling(w, 1.0f);
    if (adaptive_.step_scaling() == AdaptiveBatchConfig::SERVER_WEIGHT) client_->SetPushScaling(1.0f, w);
  }
  if (!pipelined) model_->Push(client_.get());
  if (slowdown_ > 1.0)
    TETHER_RETURN_IF_ERROR(slow_idle_.Idle(SecondsSince(pull_start), [&](int ms) { return client_->Idle(ms); }));
  report_.samples += static_cast<uint64_t>(batch.rows());
  client_->set_samples_trained(report_.samples);
  clock_rows_ += batch.rows();
  ++run_minibatches_;
  bs_min_ = std::min(bs_min_, bs_);
  bs_max_ = std::max(bs_max_, bs_);
  clock_loss_ += *loss;
  ++clock_batches_;
  ++minibatches_;
  return Status::OK();
}

Status TrainingRun::EndClock(int epoch, const Minibatch& batch, float loss) {
  // Ask shard 0 for a checkpoint clock (once per request): a stop, or rank
  // 0's timer.
  const bool want = stop_->checkpointing() && stop_->WantCheckpoint(SteadyClock::now(), /*take=*/true);
  const int64_t clock_bs = bs_;
  if (adaptive_.enabled()) {
    AdaptiveBatchClock r;
    r.set_rows(clock_rows_);
    r.set_batch_size(static_cast<int32_t>(bs_));
    r.set_minibatch_size(config_.train().minibatch_size());
    *r.mutable_config() = adaptive_;
    // Shard 0 times this worker from CLOCK to CLOCK; a clock in which it
    // waited for a chunk (or evaluated) is no measure of its pace, and
    // would make a fast worker that waited on a slow one's last chunks look
    // slow. (Checkpoints are not counted: every worker takes each one.)
    const double idle_s = IdleSeconds();
    r.set_idle_s(std::max(0.0, idle_s - idle_reported_s_));
    idle_reported_s_ = idle_s;
    client_->SetAdaptiveBatchReport(r);
  }
  clock_rows_ = 0;
  TETHER_RETURN_IF_ERROR(client_->Clock(want));
  if (adaptive_.enabled() && client_->adaptive_batch_size() > 0) bs_ = client_->adaptive_batch_size();
  if (client_->clock() % log_every_ == 0)
    VLOG(1) << who_ << "clock " << client_->clock() << " loss " << loss << " batch " << clock_bs;
  const double train_s = TrainSeconds();
  if (metrics_log_ != nullptr) {
    metrics_log_->Write({{"kind", "clock"}, {"clock", client_->clock()}, {"epoch", epoch + 1},
                         {"loss", clock_loss_ / clock_batches_}, {"samples", report_.samples},
                         {"train_s", train_s}, {"pull_wait_s", pull_wait_}, {"batch_size", clock_bs},
                         {"minibatches", minibatches_}});
  }
  progress_now_.clock_loss = clock_loss_ / clock_batches_;
  progress_now_.minibatches = minibatches_;
  PublishProgress(epoch + 1);
  clock_loss_ = 0;
  clock_batches_ = 0;
  if (progress_->Due()) {
    LOG(INFO) << who_ << "epoch " << epoch + 1 << "/" << config_.train().epochs() << " "
              << static_cast<int>(100.0 * batch.end / batch.features->rows) << "%, clock " << client_->clock()
              << ", loss " << loss << ", " << static_cast<int64_t>(report_.samples / std::max(1e-9, train_s))
              << " samples/s, " << static_cast<int>(100 * pull_wait_ / std::max(1e-9, train_s))
              << "% waiting on pulls, ETA "
              << FormatEta(EtaSeconds(SecondsSince(train_start_), epoch,
                                      static_cast<double>(batch.end) / std::max<int64_t>(1, batch.features->rows),
                                      config_.train().epochs()));
  }
  bool stop_checkpoint = false;
  TETHER_RETURN_IF_ERROR(CheckpointIfDue(epoch, batch.end, loss_sum_, loss_batches_, &stop_checkpoint));
  if (stop_checkpoint) {
    LOG(WARNING) << who_ << "leaving the job after the checkpoint at clock " << client_->clock()
                 << " (resume with --resume_from=" << config_.checkpoint().dir() << ")";
    Leave();
  }
  return Status::OK();
}

Status TrainingRun::EndEpoch(int epoch, uint64_t samples_from) {
  // Two 64 KiB reads per data file: a file changed under the job fails it
  // here, naming the file, before anything of the epoch is reported.
  TETHER_RETURN_IF_ERROR(CheckDataUnchanged("at the end of epoch " + std::to_string(epoch + 1)));
  epoch_rows_.push_back(static_cast<int64_t>(report_.samples - samples_from));
  source_->EndEpoch(epoch, epoch_rows_.back(), &report_);
  // An epoch in which this worker trained no minibatch (no rows dealt to
  // it, no chunk left) keeps the loss it had: 0/0 is no loss.
  if (loss_batches_ > 0) {
    report_.final_loss = loss_sum_ / static_cast<double>(loss_batches_);
    report_.final_loss_from = "training";
  }
  progress_now_.epoch_loss = report_.final_loss;
  progress_now_.minibatches = minibatches_;
  PublishProgress(epoch + 1);
  const double t = SecondsSince(train_start_);
  LOG(INFO) << who_ << "epoch " << epoch + 1 << "/" << config_.train().epochs() << " clock " << client_->clock()
            << " loss " << report_.final_loss << ", " << static_cast<int64_t>(report_.samples / t) << " samples/s, "
            << static_cast<int>(100 * pull_wait_ / t) << "% waiting on pulls, " << t << " s"
            << EtaNote(t, epoch + 1)
            << (adaptive_.enabled() ? ", batch " + std::to_string(bs_) + " (" + std::to_string(epoch_rows_.back()) +
                                          " rows this epoch)"
                                    : std::string());
  NoteDivergence(epoch);
  if (eval_->DueAfter(epoch + 1)) {
    // Every worker evaluates its part after the epoch, timed apart from
    // training.
    const auto eval_start = SteadyClock::now();
    TETHER_RETURN_IF_ERROR(eval_->AfterEpoch(epoch + 1, TrainSeconds(), report_.samples, report_.final_loss));
    eval_seconds_ += SecondsSince(eval_start);
  }
  if (validation_ != nullptr) {
    const auto eval_start = SteadyClock::now();
    TETHER_RETURN_IF_ERROR(validation_->AfterEpoch(epoch + 1, TrainSeconds()));
    eval_seconds_ += SecondsSince(eval_start);
  }
  return Status::OK();
}

std::string TrainingRun::EtaNote(double elapsed_s, int done_epochs) const {
  // Epochs of a few seconds or more: a person waits, and wants to know how
  // long (a quick run's lines stay as they are).
  constexpr double kEtaFromEpochSeconds = 3.0;
  const int epochs = config_.train().epochs();
  if (done_epochs >= epochs || elapsed_s / std::max(1, done_epochs) < kEtaFromEpochSeconds) return std::string();
  return ", ETA " + FormatEta(EtaSeconds(elapsed_s, done_epochs, 0.0, epochs));
}

void TrainingRun::NoteDivergence(int epoch) {
  const double reference = std::isfinite(first_loss_) ? std::max(first_loss_, uniform_loss_) : uniform_loss_;
  if (report_.diverged || loss_batches_ == 0 ||
      !LossDiverged(report_.final_loss, reference, config_.train().divergence_factor()))
    return;
  report_.diverged = true;
  report_.diverged_at_epoch = epoch + 1;
  LOG(WARNING) << who_ << "training diverged at epoch " << epoch + 1 << ": mean loss " << report_.final_loss
               << " is above train.divergence_factor " << config_.train().divergence_factor() << " x " << reference
               << " (the larger of the first minibatch's loss " << first_loss_ << " and log("
               << model_->num_outputs() << ") = " << uniform_loss_ << "); lower optimizer.learning_rate"
               << (config_.train().fail_on_divergence() ? "; the run will exit 3 (train.fail_on_divergence)" : "");
}

// ---- Stops and checkpoints between minibatches.

bool TrainingRun::NoticeStop() {
  if (stop_->stop_pending()) return true;
  // A server told to stop (its stop signal, a preempted node) ends the job
  // as this worker's own stop signal would.
  const bool own = options_.stop_requested && options_.stop_requested();
  const int shard = client_->stopping_shard();
  if (!own && shard < 0) return false;
  stop_->Notice(own, shard, SteadyClock::now());
  report_.stopped_by_shard = stop_->stopped_by_shard();
  LOG(WARNING) << who_ << (own ? std::string("stop requested") : "server shard " + std::to_string(shard) + " was told to stop")
               << " at clock " << client_->clock()
               << (stop_->checkpointing() ? ": asking for a stop checkpoint, then leaving the job"
                                          : ": leaving the job without a checkpoint (no checkpoint dir: a rerun "
                                            "starts from the beginning)");
  return true;
}

WorkerState TrainingRun::StateAt(int epoch, int64_t next_row, double loss_sum, int64_t loss_batches) const {
  WorkerState st;
  st.set_epoch(epoch);
  st.set_next_row(next_row);
  st.set_minibatches(minibatches_);
  st.set_samples(report_.samples);
  st.set_loss_sum(loss_sum);
  st.set_loss_batches(loss_batches);
  st.set_first_loss(first_loss_);
  st.set_diverged(report_.diverged);
  st.set_diverged_at_epoch(report_.diverged_at_epoch);
  if (report_.final_loss_from != "none") st.set_final_loss(report_.final_loss);
  st.set_train_seconds(start_.train_seconds + TrainSeconds());
  st.set_partition_rows(partition_rows_);
  // The rows of the epoch in progress not trained yet, in training order.
  const std::vector<int64_t>& lines = source_->epoch_lines();
  for (size_t i = static_cast<size_t>(std::min<int64_t>(next_row, lines.size())); i < lines.size(); ++i)
    st.add_remaining_rows(lines[i]);
  if (const std::vector<int64_t>* dealt = source_->dealt_lines(); dealt != nullptr)
    *st.mutable_dealt_rows() = {dealt->begin(), dealt->end()};
  st.set_model_state(model_->SaveState());
  // Early stopping and the best epoch continue from here on resume.
  if (validation_ != nullptr) validation_->SaveHistory(st.mutable_validation_history());
  return st;
}

Status TrainingRun::CheckpointIfDue(int epoch, int64_t next_row, double loss_sum, int64_t loss_batches,
                                    bool* leave) {
  *leave = false;
  const int64_t clock = client_->clock();
  if (!stop_->CheckpointDue(clock, config_.checkpoint().every_clocks(), client_->due_checkpoint_clock()))
    return Status::OK();
  TETHER_ASSIGN_OR_RETURN(const bool taken,
                          checkpointer_->Take(StateAt(epoch, next_row, loss_sum, loss_batches), &report_));
  *leave = stop_->CheckpointDone(clock, /*abandoned=*/!taken, SteadyClock::now());
  return Status::OK();
}

Status TrainingRun::EmptyClock() {
  // A checkpoint clock reached while waiting for a chunk is taken here:
  // every worker still training takes part in each cut. The empty clock
  // carries this worker's request for one (a stop, rank 0's timer).
  TETHER_RETURN_IF_ERROR(client_->Clock(stop_->WantCheckpoint(SteadyClock::now(), /*take=*/true)));
  // A stop's checkpoint is remembered by StopControl: the feed's stop hook
  // then ends the wait.
  bool stop_checkpoint = false;
  return CheckpointIfDue(feed_epoch_, 0, 0, 0, &stop_checkpoint);
}

RowSourceHooks TrainingRun::SourceHooks() {
  RowSourceHooks hooks;
  hooks.feed.ask = [this](const DataOnDemandChunk& r) { return session_->ChunkNext(r); };
  hooks.feed.idle = [this](int ms) { return client_->Idle(ms); };
  hooks.feed.clock = [this] { return client_->clock(); };
  hooks.feed.empty_clock = [this] { return EmptyClock(); };
  // A request waiting in the worker (not yet on a CLOCK) makes the feed
  // complete a clock now, ahead of the others if need be.
  hooks.feed.want_clock = [this] { return stop_->WantCheckpoint(SteadyClock::now(), /*take=*/false); };
  hooks.feed.on_wait = [this] {
    LOG(INFO) << who_ << "waiting for a chunk at clock " << client_->clock()
              << ": every chunk of the epoch is dealt and others still train theirs";
  };
  // A stop while waiting for a chunk: without checkpoints it ends the wait
  // at once; with them once its checkpoint is taken (the feed's empty
  // clocks reach the clock shard 0 picked), or when the stop checkpoint's
  // grace is over (the run says so and exits non-zero).
  hooks.feed.stop = [this] { return NoticeStop() && stop_->WaitForChunkEnds(SteadyClock::now()); };
  hooks.idle = [this] { return client_->Idle(1); };
  return hooks;
}

void TrainingRun::Leave() {
  report_.left_early = true;
  left_ = true;
  if (metrics_log_ != nullptr) (void)metrics_log_->Flush();
  if (Status st = session_->Leave(kLeaveTimeoutMs); !st.ok()) LOG(WARNING) << who_ << "goodbye incomplete: " << st.message();
}

void TrainingRun::LeaveStoppedFeed() {
  switch (stop_->chunk_wait_exit()) {
    case StopControl::ChunkWaitExit::kNoCheckpoints:
      LOG(WARNING) << who_ << "stop requested at clock " << client_->clock()
                   << " while waiting for a chunk: leaving the job";
      break;
    case StopControl::ChunkWaitExit::kAfterCheckpoint:
      LOG(WARNING) << who_ << "leaving the job after the checkpoint at clock " << stop_->stop_clock()
                   << " (resume with --resume_from=" << config_.checkpoint().dir() << ")";
      break;
    case StopControl::ChunkWaitExit::kGraceOver:
      LOG(WARNING) << who_ << "stop requested: the stop checkpoint"
                   << (client_->due_checkpoint_clock() >= 0
                           ? " at clock " + std::to_string(client_->due_checkpoint_clock())
                           : std::string())
                   << " was not reached within " << kStopCheckpointGraceS << " s while waiting for a chunk at clock "
                   << client_->clock()
                   << ": leaving the job without a stop checkpoint (a resume starts from the latest complete one in "
                   << config_.checkpoint().dir() << ")";
      break;
  }
  Leave();
}

}  // namespace tether
