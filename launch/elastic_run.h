// tether-launch --elastic_schedule while the job runs: when the job's epoch
// (the largest any worker wrote to its progress file) reaches a step, start
// workers with the next unused ranks, or stop the most recently started ones
// gracefully (SIGTERM: each says BYE). Steps come from ParseElasticSchedule
// (launch/elastic_schedule.h).
//
// A worker is "in the job" once it wrote its progress file (connected and
// training). A worker started but not yet in it would die of a SIGTERM
// before it ever joined, so a stop step waits for it; and once a worker
// finished (the job's data is used) the steps left are dropped and joiners
// not yet in the job are stopped, since they would wait for servers that
// are exiting.
//
// Ownership: borrows the process table on each call. Thread-safety:
// single-threaded (the launcher's loop).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "launch/elastic_schedule.h"
#include "launch/process_table.h"

namespace tether {

class ElasticRun {
 public:
  /// `steps` sorted by epoch; ranks from `num_workers` on are new;
  /// `progress_dir` holds the workers' progress files.
  ElasticRun(std::vector<ElasticStep> steps, int num_workers, std::string progress_dir);

  /// There is a schedule (so every worker writes a progress file).
  bool enabled() const { return !steps_.empty(); }
  /// Some step is still to apply.
  bool pending() const { return next_step_ < steps_.size(); }
  /// Where worker `rank` writes "EPOCH CLOCK" (--progress_file).
  std::string ProgressFile(int rank) const;

  /// A worker finished the job (exit 0): its data is used.
  void WorkerFinished() { data_used_ = true; }

  /// Starts worker `rank`; its error fails the job.
  using StartWorker = std::function<Status(int rank)>;
  /// One look at the job: drops the steps left and stops joiners not yet in
  /// the job once its data is used; otherwise, while `workers_live`, applies
  /// the steps due by the job's epoch. Returns the rank that could not be
  /// started and why (the caller ends the job), else nullopt.
  std::optional<std::pair<int, Status>> Poll(ProcessTable* table, bool workers_live, const StartWorker& start);

 private:
  bool InJob(const Child& c) const;
  int JobEpoch(const ProcessTable& table) const;
  void StopJoinersOutside(ProcessTable* table);
  std::optional<std::pair<int, Status>> Apply(ProcessTable* table, const StartWorker& start);
  // A stop step; false while it must wait for joiners to come in.
  bool Stop(const ElasticStep& step, int epoch, ProcessTable* table);

  std::vector<ElasticStep> steps_;
  int num_workers_;
  std::string progress_dir_;
  size_t next_step_ = 0;  // the first step not applied
  int next_rank_;         // the next unused worker rank
  bool data_used_ = false;
};

}  // namespace tether
