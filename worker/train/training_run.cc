// The run's phases before training: the checks, the data, the resume, the
// connection and where training starts (training_loop.cc trains,
// training_finish.cc ends the run).
#include "worker/train/training_run.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <sstream>

#include <glog/logging.h>

#include "core/config.h"
#include "core/memory_fit.h"
#include "core/net/curve.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/chunk_state.h"
#include "checkpoint/residual_file.h"
#include "eval/early_stopping.h"
#include "worker/client/local_replica.h"
#include "worker/models/model_registry.h"
#include "worker/train/job_outcome.h"
#include "worker/train/on_demand_resume.h"
#include "worker/train/resume_check.h"
#include "worker/train/resume_epochs.h"
#include "worker/train/validation_rows.h"

namespace tether {
namespace {

// The wall clock, seconds since the Unix epoch: the one clock workers on
// different hosts share, for the job's span of training (WorkerStats).
double UnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

TrainingRun::TrainingRun(const JobConfig& config, const TrainerOptions& options)
    : config_(config),
      options_(options),
      rank_(options.rank),
      num_workers_(config.cluster().num_workers()),
      joiner_(options.rank >= config.cluster().num_workers()),
      who_("[worker " + std::to_string(options.rank) + "] ") {}

TrainingRun::~TrainingRun() = default;

StatusOr<TrainReport> TrainingRun::Run() {
  Status st = Prepare();
  if (st.ok()) st = Resume();
  // A file of the checkpoint missing or damaged: the message names the
  // checkpoint and the older ones a resume may read instead.
  if (!resume_dir_.empty() && (st.code() == Status::Code::kNotFound || st.code() == Status::Code::kDataLoss))
    st = WithOlderCheckpointsAdvice(st, resume_dir_);
  if (st.ok()) st = Connect();
  if (st.ok()) st = StartTraining();
  if (st.ok() && !left_) st = Train();
  if (st.ok() && !left_) st = Finish();
  // The job's checkpoints are written (or it failed): another job may now
  // take the folders, even while this object lives on.
  folder_locks_.clear();
  if (!st.ok()) return st;
  return report_;
}

// ---- Prepare: everything that can fail before a server is contacted.

Status TrainingRun::Prepare() {
  TETHER_RETURN_IF_ERROR(CheckBeforeStart());
  TETHER_RETURN_IF_ERROR(LockCheckpointFolders());
  // The backend first: a missing GPU should fail before any data is read.
  TETHER_ASSIGN_OR_RETURN(backend_, CreateBackend(config_.train().device(), config_.train().threads()));
  LOG(INFO) << who_ << "compute backend " << backend_->name() << " (--device=" << config_.train().device() << ")";
  TETHER_RETURN_IF_ERROR(LoadData());
  tables_ = TablesForJob(config_);
  TETHER_ASSIGN_OR_RETURN(model_, CreateModel(config_, tables_, backend_.get(), rank_));
  // A new job must not mix its checkpoints with another job's: pruning and
  // "the latest" would pick across both (a fresh run would delete the old
  // job's checkpoints, and a resume could take the old job's).
  const std::string& dir = config_.checkpoint().dir();
  if (rank_ == 0 && options_.resume_from.empty() && !dir.empty()) {
    StatusOr<std::string> existing = ResolveCheckpoint(dir);
    if (existing.ok())
      return Status::InvalidArgument(who_ + "checkpoint.dir " + dir + " already holds checkpoints (the latest: " +
                                     *existing + "): resume from them with --resume_from=" + dir +
                                     ", or give the new job its own directory");
  }
  return Status::OK();
}

Status TrainingRun::LockCheckpointFolders() {
  if (rank_ != 0 || joiner_) return Status::OK();
  const std::string dir = AbsoluteCheckpointPath(config_.checkpoint().dir());
  if (!dir.empty()) {
    StatusOr<CheckpointDirLock> lock = CheckpointDirLock::Acquire(dir, CheckpointDirLock::Mode::kWrite);
    if (!lock.ok()) return lock.status().WithPrefix(who_ + "checkpoint.dir");
    folder_locks_.push_back(std::move(lock).value());
  }
  if (options_.resume_from.empty()) return Status::OK();
  const std::string from = AbsoluteCheckpointPath(ResumeFolder(options_.resume_from));
  if (from == dir) return Status::OK();  // held to write, which is more
  StatusOr<CheckpointDirLock> lock = CheckpointDirLock::Acquire(from, CheckpointDirLock::Mode::kRead);
  if (!lock.ok()) return lock.status().WithPrefix(who_ + "--resume_from=" + options_.resume_from);
  folder_locks_.push_back(std::move(lock).value());
  return Status::OK();
}

Status TrainingRun::CheckBeforeStart() {
  // Elastic membership: a rank beyond the initial ones joins the running
  // job; it needs rows dealt on demand, and holds no part of the test set.
  if (Status st = CheckWorkerRank(config_, rank_, RowsDealtOnDemand(config_)); !st.ok())
    return st.code() == Status::Code::kInvalidArgument ? Status::InvalidArgument(who_ + st.message())
                                                        : Status::FailedPrecondition(who_ + st.message());
  // The model's own checks and its tables (sizes, message limits): refused
  // here, before any data is read or server contacted, not at HELLO.
  TETHER_RETURN_IF_ERROR(ValidateModelConfig(config_));
  // Bounded worker memory: the cache's capacity, and whether the cache and
  // the dense tables fit in what this process may count on.
  const std::vector<TableSpec> tables = TablesForJob(config_);
  StatusOr<uint64_t> capacity = ResolveCacheCapacity(config_, tables);
  if (!capacity.ok()) return Status::FailedPrecondition(who_ + capacity.status().message());
  cache_capacity_ = *capacity;
  const Status fits =
      CheckWorkerFits("worker " + std::to_string(rank_), tables, cache_capacity_, MemoryBudgetFor(config_));
  if (!fits.ok()) return Status::ResourceExhausted(who_ + fits.message());
  if (cache_capacity_ > 0) LOG(INFO) << who_ << "parameter cache capacity " << FormatBytes(cache_capacity_);
  // A metrics file that cannot be written would be found only after the
  // whole run: check its directory now (on every worker given one: if rank
  // 0 leaves, the lowest rank still there writes the metrics).
  const std::string& out = options_.metrics_out;
  if (!out.empty()) {
    std::string dir = out.substr(0, out.find_last_of('/') + 1);
    if (dir.empty()) dir = ".";
    if (access(dir.c_str(), W_OK) != 0)
      return Status::IOError(out + ": cannot write the metrics file there (directory " + dir + ": " +
                             std::strerror(errno) + ")");
  }
  return Status::OK();
}

Status TrainingRun::LoadData() {
  const auto load_start = SteadyClock::now();
  // Stamped before they are read: a file that changes from here on is
  // named at the next check (the end of an epoch, a checkpoint, a resume).
  TETHER_ASSIGN_OR_RETURN(std::vector<WatchedFile> files, JobDataFiles(config_));
  TETHER_ASSIGN_OR_RETURN(data_watch_, DataWatch::Start(std::move(files)));
  StatusOr<TrainingData> data = LoadTrainingData(config_, rank_, !options_.resume_from.empty());
  if (!data.ok()) return NoteInput(data.status());
  data_ = std::move(data).value();
  TETHER_RETURN_IF_ERROR(CarveValidation());
  partition_rows_ = data_.held_rows();
  // Every worker evaluates its own part of the test set (partitioned
  // evaluation), split as the training file is; with a validation split,
  // only at the end (Evaluate), so nothing chosen during training saw it.
  if (!test_deferred_) {
    TETHER_ASSIGN_OR_RETURN(test_, LoadTestPart());
  }
  report_.train_rows = partition_rows_;
  LOG(INFO) << who_ << "read " << partition_rows_ << " training rows (" << data_.rows.features.nnz()
            << " non-zeros) in " << SecondsSince(load_start) << " s"
            << (test_deferred_ ? ", " + std::to_string(validation_rows_.features.rows) +
                                     " validation rows; the test split is read after training"
                               : ", " + std::to_string(test_.features.rows) + " test rows");
  const bool in_memory =
      data_.mode == TrainingData::Mode::kStaticSplit || data_.mode == TrainingData::Mode::kOnDemand;
  if (in_memory && partition_rows_ == 0 && HasValidationSplit(config_))
    return Status::InvalidArgument(who_ + "no training rows left in partition " + std::to_string(rank_) + " of " +
                                   config_.data().train_file() + " once the validation split (" +
                                   ValidationSplitField(config_) + ") took its rows: leave more rows to train on" +
                                   (num_workers_ > 1 ? ", or use fewer workers" : ""));
  if (in_memory && partition_rows_ == 0)
    return Status::InvalidArgument(who_ + "partition " + std::to_string(rank_) + " of " +
                                   config_.data().train_file() + " has no rows; use fewer workers");
  return Status::OK();
}

StatusOr<Dataset> TrainingRun::LoadTestPart() const {
  if (joiner_) return Dataset();  // a rank beyond the initial ones holds no test rows
  return LoadTestPartOf(rank_);
}

StatusOr<Dataset> TrainingRun::LoadTestPartOf(int rank) const {
  const DataConfig& d = config_.data();
  const bool same_file = d.test_file().empty();
  StatusOr<Dataset> part = LoadSplit(config_, same_file ? d.train_file() : d.test_file(),
                                     same_file ? d.train_label_file() : d.test_label_file(), d.test_split(), rank,
                                     num_workers_);
  if (!part.ok()) return NoteInput(part.status());
  return part;
}

Status TrainingRun::NoteInput(Status read) const {
  if (options_.input_refused != nullptr && IsBadInput(read)) *options_.input_refused = true;
  return read;
}

Status TrainingRun::CarveValidation() {
  if (!HasValidationSplit(config_)) return Status::OK();
  // The rule's metric must be one the model's evaluation gives, before any
  // server is contacted.
  const std::string metric = ValidationMetric(config_);
  if (const std::string problem = EarlyStopper::MetricProblem(metric, LabelKindName(LabelKindOf(config_)));
      !problem.empty())
    return Status::InvalidArgument("train.early_stopping.metric: '" + metric + "' " + problem);
  // The same rows whatever the number of workers: a hash of each row's
  // line in the data file, or the rows a file names
  // (worker/train/validation_rows.h).
  StatusOr<Dataset> validation = TakeValidationShare(config_, rank_, num_workers_, &data_.rows);
  if (!validation.ok()) return NoteInput(validation.status());
  validation_rows_ = std::move(validation).value();
  test_deferred_ = true;
  std::ostringstream source;
  if (config_.data().validation_split().empty())
    source << "train.validation_fraction " << config_.train().validation_fraction() << ", validation_seed "
           << config_.train().validation_seed();
  else
    source << "data.validation_split " << config_.data().validation_split();
  LOG(INFO) << who_ << "validation split: " << validation_rows_.features.rows << " rows evaluated here, "
            << data_.rows.features.rows << " training rows left in this partition (" << source.str()
            << "), evaluated after every epoch on " << metric
            << (config_.train().early_stopping().patience() > 0
                    ? ", patience " + std::to_string(config_.train().early_stopping().patience()) + " epoch(s)"
                    : std::string());
  if (rank_ == 0) {
    TETHER_ASSIGN_OR_RETURN(const int64_t shared, ValidationRowsInTestSplit(config_));
    LOG_IF(WARNING, shared > 0) << who_ << shared << " row(s) of data.validation_split (" << config_.data().validation_split()
                                << ") are test rows too (data.test_split " << config_.data().test_split()
                                << "): settings chosen on them are chosen on the test split";
  }
  return Status::OK();
}

// ---- Resume (options.resume_from): where this worker starts.

Status TrainingRun::CheckResumeData() const {
  std::vector<std::string> notes;
  // Always FailedPrecondition; "[worker R] " as the client's errors start.
  if (Status st = data_watch_.CheckResume(manifest_, resume_dir_, &notes); !st.ok()) {
    if (options_.input_refused != nullptr) *options_.input_refused = true;
    return Status::FailedPrecondition(who_ + st.message());
  }
  // An old checkpoint without stamps resumes as before, saying so once.
  for (const std::string& note : notes) {
    if (manifest_.data_files_recorded())
      LOG(INFO) << who_ << note;
    else
      LOG(WARNING) << who_ << note;
  }
  return Status::OK();
}

Status TrainingRun::CheckResumeEpochs() const {
  // A damaged state file is refused where it is read for the resume
  // (ResumeState, CheckDataOnDemandResume), naming it: another rank's is
  // not this one's to fail on.
  StatusOr<std::optional<ChunkCoordinatorState>> chunks = ReadChunkState(resume_dir_, manifest_);
  if (!chunks.ok()) return Status::OK();
  const WorkerStateReader read = [this](int r) { return ReadWorkerState(resume_dir_, manifest_, r); };
  StatusOr<std::string> diff = ResumeEpochsDiff(manifest_, *chunks, config_, read);
  if (!diff.ok()) return Status::OK();
  if (!diff->empty()) return Status::FailedPrecondition(who_ + "cannot resume from " + resume_dir_ + ": " + *diff);
  return Status::OK();
}

Status TrainingRun::CheckDataUnchanged(const std::string& when) const {
  // A changed file is bad input: a restart would read it again.
  const Status st = data_watch_.Check(when);
  if (st.ok()) return st;
  if (options_.input_refused != nullptr) *options_.input_refused = true;
  return Status::FailedPrecondition(who_ + st.message());
}

Status TrainingRun::Resume() {
  if (!options_.resume_from.empty()) {
    TETHER_ASSIGN_OR_RETURN(resume_dir_, ResolveCheckpoint(options_.resume_from));
    TETHER_ASSIGN_OR_RETURN(manifest_, ReadManifest(resume_dir_));
    // tether-worker and tether-launch refuse these before any data is read
    // (CheckResumeConfig); an in-process job, or a checkpoint that changed
    // since, is refused here.
    if (const std::string diff = ResumeConfigDiff(manifest_, config_, tables_); !diff.empty())
      return Status::FailedPrecondition(who_ + "cannot resume from " + resume_dir_ + ": " + diff);
    TETHER_RETURN_IF_ERROR(CheckResumeEpochs());
    TETHER_RETURN_IF_ERROR(CheckResumeData());
    // Data files at other paths with the same stamps are the same data.
    const JobConfig& was = manifest_.config();
    const bool paths_differ = !manifest_.data_files_recorded() &&
                              (was.data().train_file() != config_.data().train_file() ||
                               was.data().train_split() != config_.data().train_split() ||
                               was.data().validation_split() != config_.data().validation_split());
    if (was.train().seed() != config_.train().seed() || paths_differ)
      LOG(WARNING) << who_ << "resuming with another train.seed, data.train_file, data.train_split or "
                   << "data.validation_split than the "
                   << "checkpoint's: the rows left of the epoch are those of the checkpoint's order, the model's "
                   << "state continues, but the run is not the one that was stopped";
    // Data on demand: shard 0 resumes the dealing (server/chunk_state.h);
    // this worker's state is its counters (worker/train/on_demand_resume.h).
    if (Status st = CheckDataOnDemandResume(manifest_, resume_dir_, config_, partition_rows_); !st.ok())
      return st.WithPrefix("[worker " + std::to_string(rank_) + "]");
    if (config_.train().data_on_demand()) {
      TETHER_ASSIGN_OR_RETURN(resume_, OnDemandResumeState(manifest_, resume_dir_, config_, rank_, partition_rows_,
                                                           MinibatchesPerClock(config_)));
    } else {
      const WorkerStateReader read = [this](int r) { return ReadWorkerState(resume_dir_, manifest_, r); };
      TETHER_ASSIGN_OR_RETURN(
          resume_, ResumeState(manifest_, resume_dir_, config_, rank_, partition_rows_, read, &resume_finished_));
    }
    LOG(INFO) << who_ << "resuming from " << resume_dir_ << " at clock " << manifest_.clock() << ": "
              << (resume_finished_ ? std::string("nothing left to train")
                                   : "epoch " + std::to_string(resume_.epoch() + 1) + ", row " +
                                         std::to_string(resume_.next_row()) +
                                         (resume_.dealt_rows_size() > 0
                                              ? " of " + std::to_string(resume_.dealt_rows_size()) + " dealt rows"
                                              : ""));
    if (!resume_.model_state().empty()) TETHER_RETURN_IF_ERROR(model_->RestoreState(resume_.model_state()));
    TETHER_RETURN_IF_ERROR(ReadResumeResiduals());
  }
  VLOG(1) << who_ << "model " << model_->name() << ", tables "
            << DescribeTables(google::protobuf::RepeatedPtrField<TableSpec>(tables_.begin(), tables_.end()));
  report_.model = model_->name();
  return Status::OK();
}

Status TrainingRun::ReadResumeResiduals() {
  // Only this rank's own state names a residual file: a resume with another
  // number of workers starts every residual at zero.
  if (resume_finished_ || !resume_.has_residual_file()) return Status::OK();
  StatusOr<std::vector<ResidualTable>> read = ReadResidualFile(resume_dir_, resume_.residual_file());
  if (!read.ok()) return read.status().WithPrefix("[worker " + std::to_string(rank_) + "] cannot resume");
  const std::string diff =
      DiffResidualTables(*read, tables_, CheckpointJoinPath(resume_dir_, resume_.residual_file().name()));
  if (!diff.empty()) return Status::FailedPrecondition(who_ + "cannot resume: " + diff);
  resume_residuals_ = std::move(*read);
  return Status::OK();
}

void TrainingRun::RestoreResiduals() {
  if (resume_residuals_.empty()) return;
  const std::vector<std::string> skipped = client_->mutable_push_encoder()->RestoreResiduals(resume_residuals_);
  const std::string line =
      DescribeResidualRestore(resume_.residual_file().name(), resume_residuals_, skipped, tables_);
  // A table skipped trains on without the residuals it had: worth a warning.
  if (skipped.empty())
    LOG(INFO) << who_ << line;
  else
    LOG(WARNING) << who_ << line;
  resume_residuals_.clear();
}

// ---- Connect: HELLO, the replica, round 0 of the evaluation.

ClientOptions TrainingRun::MakeClientOptions() const {
  ClientOptions copts = ClientOptionsFor(config_, rank_, options_.servers);
  copts.servers_source = options_.servers_source;
  copts.server_lookup = options_.server_lookup;
  copts.claim_lookup = options_.claim_lookup;
  copts.cache_capacity_bytes = cache_capacity_;
  copts.context = options_.zmq_context;
  copts.abort = options_.abort;
  // A stop request cuts the client's waits short (within ~100 ms). With
  // checkpoints on, a worker that is training first trains on to the stop's
  // checkpoint clock: from the start of training its waits go on, for
  // kStopCheckpointGraceS at most, then give up too (StopControl). (A
  // second signal a second later exits the process at once.)
  if (options_.stop_requested) {
    copts.stop_requested = [stop = options_.stop_requested, control = stop_] {
      return control->WaitGivesUp(stop(), SteadyClock::now());
    };
  }
  if (!resume_dir_.empty()) {
    copts.resume_from = resume_dir_;
    copts.resume_clock = manifest_.clock();
  }
  copts.data_digests = data_watch_.FieldDigests();
  return copts;
}

Status TrainingRun::Connect() {
  StopControl::Options stop_options;
  stop_options.checkpointing = !config_.checkpoint().dir().empty();
  stop_options.every_seconds = rank_ == 0 ? config_.checkpoint().every_seconds() : 0;
  stop_ = std::make_shared<StopControl>(stop_options);
  ClientOptions copts = MakeClientOptions();
  bool networked = false;
  for (const std::string& ep : options_.servers) networked = networked || ep.rfind("inproc://", 0) != 0;
  if (config_.security().has_curve() && networked) {
    // inproc:// (a one-process job) never leaves the process: no keys needed.
    StatusOr<CurveOptions> curve = CurveClientOptions(config_.security().curve());
    if (!curve.ok()) return curve.status();
    copts.curve = *curve;
    LOG(INFO) << who_ << "CURVE on: public key " << copts.curve.public_key << ", servers' public key "
              << copts.curve.server_public_key;
  }
  TETHER_ASSIGN_OR_RETURN(client_, WorkerClient::Connect(copts));
  session_ = std::make_unique<JobSession>(client_.get());
  RestoreResiduals();
  // Reading a streamed block can take seconds: heartbeat the servers between
  // buffers, or they would take this worker for dead (worker_timeout_ms).
  data_.HeartbeatWith([this] { return client_->Idle(1); });
  LOG(INFO) << who_ << "connected to " << options_.servers.size() << " server(s), model " << model_->name()
            << ", staleness " << StalenessName(copts.staleness);
  if (config_.consistency().model() == AVERAGE) {
    // Weighted model averaging: the model trains a local replica
    // (worker/client/local_replica.h); every clock is a round.
    client_->AttachReplica(std::make_unique<LocalReplica>(copts.tables, client_.get()));
    LOG(INFO) << who_ << "consistency AVERAGE: local replica, a round every " << AveragePeriodMinibatches(config_)
              << " minibatch(es) (period_rows " << config_.consistency().period_rows() << "), model momentum "
              << config_.consistency().model_momentum();
  }
  checkpointer_ = std::make_unique<Checkpointer>(config_, rank_, static_cast<int>(options_.servers.size()), tables_,
                                                 client_.get(), session_.get(), &data_watch_, options_.input_refused);
  // Partitioned evaluation's round 0 (worker/eval/partitioned_eval.h): PSP@k
  // (multi-label) needs the training labels' frequencies over the whole
  // training split, which no single worker holds, and data.tf_idf the
  // features' document frequencies; likewise each worker's offset in the
  // test set.
  TrainingCounts counts;
  TETHER_RETURN_IF_ERROR(CountTrainingRows(config_, rank_, data_, [this] { return client_->Idle(1); }, &counts));
  eval_ = std::make_unique<TestEvaluation>(config_, rank_, std::move(test_), model_.get(), backend_.get(),
                                           client_.get(), session_.get());
  // The evaluator scores the parts of workers that left (a worker removed
  // for silence, an elastic leave) itself: the final metrics cover the
  // whole test set.
  eval_->set_part_loader([this](int rank) { return LoadTestPartOf(rank); });
  TETHER_RETURN_IF_ERROR(eval_->Setup(counts));
  TETHER_RETURN_IF_ERROR(WeighInput());
  if (HasValidationSplit(config_))
    validation_ = std::make_unique<ValidationEvaluation>(config_, rank_, std::move(validation_rows_), model_.get(),
                                                         backend_.get(), client_.get(), session_.get());
  return RestoreValidationHistory();
}

Status TrainingRun::WeighInput() {
  // data.tf_idf: the rows held were read unweighted (LoadSplit); round 0
  // gave the IDF of every worker's training rows, the same on every worker.
  if (!config_.data().tf_idf()) return Status::OK();
  feature_idf_ = eval_->feature_idf();
  TETHER_RETURN_IF_ERROR(FinishFeatures(config_, feature_idf_, &data_.rows.features));
  TETHER_RETURN_IF_ERROR(FinishFeatures(config_, feature_idf_, &validation_rows_.features));
  double lo = 0, hi = 0;
  if (!feature_idf_.empty()) {
    const auto [min_it, max_it] = std::minmax_element(feature_idf_.begin(), feature_idf_.end());
    lo = *min_it, hi = *max_it;
  }
  // Every worker holds the same weights: worker 0 says so on the console.
  LOG_IF(INFO, rank_ == 0 || VLOG_IS_ON(1))
      << who_ << "TF-IDF (data.tf_idf): " << feature_idf_.size() << " feature weights in [" << lo << ", " << hi
      << "] from the document frequencies of every worker's training rows; "
      << (config_.data().normalize_rows() ? "rows weighted, then normalised" : "rows weighted");
  return Status::OK();
}

Status TrainingRun::RestoreValidationHistory() {
  if (validation_ == nullptr || resume_dir_.empty() || resume_finished_) return Status::OK();
  if (resume_.has_validation_history()) return validation_->RestoreHistory(resume_.validation_history());
  if (resume_.epoch() > 0)
    LOG(WARNING) << who_ << resume_dir_ << " holds no validation history (written by an older build): early "
                 << "stopping and the best epoch start afresh at epoch " << resume_.epoch() + 1;
  return Status::OK();
}

// ---- Where training starts, and the source of its rows.

void TrainingRun::LogPipelining() const {
  // Which, and when train.pipeline asks for it but the job cannot, why.
  if (model_->Pipelines())
    LOG(INFO) << who_ << "minibatches pipelined: the next one's input rows are pulled while one computes"
              << " (train.pipeline true)";
  else if (!config_.train().pipeline())
    LOG(INFO) << who_ << "minibatches one after the other (train.pipeline false)";
  else
    LOG(INFO) << who_ << "minibatches one after the other (train.pipeline true, but " << model_->PipelineOffReason()
              << ")";
}

Status TrainingRun::StartTraining() {
  // Observability (train.metrics_dir, progress_every_s, eval_every_epochs):
  // evaluations during training are timed apart and left out of train_s.
  if (!config_.train().metrics_dir().empty()) {
    TETHER_ASSIGN_OR_RETURN(metrics_log_, MetricsLog::Open(config_.train().metrics_dir(), "worker", rank_, options_.inputs));
  }
  eval_->set_metrics_log(metrics_log_.get());
  if (validation_ != nullptr) validation_->set_metrics_log(metrics_log_.get());
  progress_.emplace(config_.train().progress_every_s());
  // The minibatch size: train.minibatch_size, or with train.adaptive_batch
  // what shard 0 last answered a CLOCK with (server/coordinator/batch_controller.h).
  bs_ = bs_min_ = bs_max_ = config_.train().minibatch_size();
  adaptive_ = ResolvedAdaptiveBatch(config_.train());
  if (adaptive_.enabled())
    LOG(INFO) << who_ << "adaptive batch sizes in [" << adaptive_.b_min() << ", " << adaptive_.b_max() << "], mean "
              << bs_ << ", step scaling " << AdaptiveBatchConfig::StepScaling_Name(adaptive_.step_scaling());
  // AVERAGE: a clock is a round of period_rows rows (whole minibatches).
  per_clock_ = MinibatchesPerClock(config_);
  log_every_ = std::max(1, config_.train().log_every_clocks());
  train_start_ = SteadyClock::now();
  train_start_unix_s_ = UnixSeconds();
  // Straggler simulation: this worker idles (slowdown − 1) × its own
  // minibatch time, heartbeating, so it is slow but alive.
  slowdown_ = rank_ == config_.train().slowdown_rank() ? config_.train().slowdown() : 1.0;
  if (slowdown_ > 1.0) LOG(INFO) << who_ << "simulating a straggler: " << slowdown_ << "x slower";
  slow_idle_ = SlowdownIdler(slowdown_);
  LogPipelining();
  // C24: the loss itself tells divergence, not only a NaN. Its reference is
  // the untrained model's loss (the first minibatch's) or a uniform
  // softmax's, whichever is larger, so a first minibatch already blown up
  // is no excuse.
  uniform_loss_ = std::log(std::max<double>(2.0, static_cast<double>(model_->num_outputs())));
  return PlanStart();
}

Status TrainingRun::PlanStart() {
  // Where training starts: a fresh run at epoch 0, row 0; a resumed one
  // where its checkpoint left it.
  if (!resume_dir_.empty()) start_ = ResumedStart(resume_, resume_finished_, config_.train().epochs());
  minibatches_ = start_.minibatches;
  report_.samples = start_.samples;
  first_loss_ = start_.first_loss;
  report_.diverged = start_.diverged;
  report_.diverged_at_epoch = start_.diverged_at_epoch;
  // The model's loss as the checkpoint recorded it: what this run reports
  // when it trains no minibatch (nothing left to train), never a made-up 0.
  // Unknown (NaN, "none") when the checkpoint has none.
  if (start_.has_final_loss) {
    report_.final_loss = start_.final_loss;
    report_.final_loss_from = "checkpoint";
  }
  // Training starts here: a stop now leads to a checkpoint, which the
  // worker's waits are given the time to reach.
  stop_->StartTraining(SteadyClock::now());
  // Rows dealt to this worker by a resume with another number of workers:
  // the rest of that epoch, trained before this worker's own partition.
  Dataset dealt;
  if (resume_.dealt_rows_size() > 0 && !resume_finished_) {
    StatusOr<Dataset> read = DealtRows(config_, resume_);
    if (!read.ok()) return NoteInput(read.status());
    dealt = std::move(read).value();
    TETHER_RETURN_IF_ERROR(FinishFeatures(config_, feature_idf_, &dealt.features));
  }
  std::vector<int64_t> dealt_lines(resume_.dealt_rows().begin(), resume_.dealt_rows().end());
  feed_epoch_ = std::max(0, resume_.epoch());
  const bool streamed = data_.mode == TrainingData::Mode::kStreamed;
  TETHER_ASSIGN_OR_RETURN(source_, MakeRowSource(config_, rank_, std::move(data_), std::move(dealt),
                                                 std::move(dealt_lines), SourceHooks()));
  // Data on demand: a worker (re)joining mid-job starts at the epoch in
  // progress.
  TETHER_ASSIGN_OR_RETURN(start_.epoch, source_->FirstEpoch(start_.epoch));
  // Stopped while waiting for its first chunk: the job is not over.
  if (source_->stopped()) {
    LeaveStoppedFeed();
    return Status::OK();
  }
  // A resume continues the epoch's loss only when shard 0 deals that epoch.
  if (source_->dealt_by_shard0() && !resume_dir_.empty() && resume_.epoch() != start_.epoch)
    start_.loss_sum = 0, start_.loss_batches = 0;
  ApplyRejoin(streamed);
  client_->set_samples_trained(report_.samples);
  return Status::OK();
}

void TrainingRun::ApplyRejoin(bool streamed) {
  // A new process in the place of one that died, timed out or left (a
  // restart by hand or by a launcher, without --resume_from): with the
  // static split its share of the data continues where the previous process
  // stopped, not from epoch 1 (RejoinPosition). The minibatch in flight when
  // it died may be trained twice or not at all (its push may or may not
  // have reached every shard).
  const int64_t prev = client_->rejoin_clock();
  const RejoinCase rejoin = ClassifyRejoin(prev, !resume_dir_.empty(), source_->dealt_by_shard0(), streamed,
                                           adaptive_.enabled(), partition_rows_);
  // The rows the rank's earlier processes trained stay the job's: this one
  // counts on from there (its own are report_.samples - start_.samples).
  if (rejoin != RejoinCase::kNotRejoining) start_.samples = report_.samples = client_->rejoin_samples();
  if (rejoin == RejoinCase::kStartsAgain) {
    LOG(WARNING) << who_ << "restarted in the running job (its previous process reached clock " << prev
                 << ") without a checkpoint: its share of the data starts again at epoch 1, because "
                 << (streamed ? "a streamed share (data.streaming)" : "adaptive minibatch sizes (train.adaptive_batch)")
                 << " has no position a clock can name; checkpoints (--resume_from) or data on demand "
                    "(--data_on_demand) continue where it stopped";
  } else if (rejoin == RejoinCase::kContinues) {
    const int epochs = config_.train().epochs();
    const RejoinPoint at = RejoinPosition(prev, per_clock_, partition_rows_, bs_, epochs);
    start_.epoch = at.epoch;
    start_.row = at.row;
    minibatches_ = at.minibatches;
    LOG(WARNING) << who_ << "restarted in the running job without a checkpoint: its previous process reached clock "
                 << prev << " (" << at.minibatches << " minibatches of " << bs_ << " rows), so its share continues at "
                 << (at.epoch < epochs ? "epoch " + std::to_string(at.epoch + 1) + ", row " +
                                             std::to_string(at.row) + " of " + std::to_string(partition_rows_)
                                       : std::string("the end (nothing left to train)"));
  }
}

}  // namespace tether
