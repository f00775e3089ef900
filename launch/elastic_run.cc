#include "launch/elastic_run.h"

#include <signal.h>

#include <glog/logging.h>

#include <algorithm>
#include <fstream>

namespace tether {

ElasticRun::ElasticRun(std::vector<ElasticStep> steps, int num_workers, std::string progress_dir)
    : steps_(std::move(steps)), num_workers_(num_workers), progress_dir_(std::move(progress_dir)),
      next_rank_(num_workers) {}

std::string ElasticRun::ProgressFile(int rank) const { return progress_dir_ + "/progress_" + std::to_string(rank); }

bool ElasticRun::InJob(const Child& c) const {
  std::ifstream in(ProgressFile(c.index));
  int e = 0;
  return static_cast<bool>(in >> e);
}

int ElasticRun::JobEpoch(const ProcessTable& table) const {
  int epoch = 1;
  for (const Child& c : table.children()) {
    if (c.role != "worker") continue;
    std::ifstream in(ProgressFile(c.index));
    int e = 0;
    if (in >> e) epoch = std::max(epoch, e);
  }
  return epoch;
}

void ElasticRun::StopJoinersOutside(ProcessTable* table) {
  for (Child& c : table->children()) {
    if (c.role != "worker" || !c.running || c.leaving || c.index < num_workers_) continue;
    if (InJob(c)) continue;
    LOG(WARNING) << "[launch] " << c.Name() << " had not joined when the job's data was used: stopping it";
    c.leaving = true;
    kill(c.pid, SIGTERM);
  }
}

std::optional<std::pair<int, Status>> ElasticRun::Poll(ProcessTable* table, bool workers_live,
                                                       const StartWorker& start) {
  // A worker that finished means the job's data is used: a joiner started
  // now would find the job over (and its servers perhaps gone).
  if (data_used_ && pending()) {
    LOG(WARNING) << "[launch] the job's workers are finishing: " << steps_.size() - next_step_
                 << " --elastic_schedule step(s) from epoch " << steps_[next_step_].epoch << " not applied";
    next_step_ = steps_.size();
  }
  if (data_used_ && enabled()) StopJoinersOutside(table);
  if (!workers_live) return std::nullopt;
  return Apply(table, start);
}

std::optional<std::pair<int, Status>> ElasticRun::Apply(ProcessTable* table, const StartWorker& start) {
  if (!pending()) return std::nullopt;
  const int epoch = JobEpoch(*table);
  for (; next_step_ < steps_.size() && steps_[next_step_].epoch <= epoch; ++next_step_) {
    const ElasticStep& step = steps_[next_step_];
    if (step.delta < 0) {
      if (!Stop(step, epoch, table)) break;
      continue;
    }
    LOG(INFO) << "[launch] epoch " << epoch << ": starting " << step.delta << " worker(s) with new ranks "
              << next_rank_ << ".." << next_rank_ + step.delta - 1 << " (--elastic_schedule " << step.epoch << ":+"
              << step.delta << ")";
    for (int i = 0; i < step.delta; ++i, ++next_rank_) {
      if (Status st = start(next_rank_); !st.ok()) return std::make_pair(next_rank_, st);
    }
  }
  return std::nullopt;
}

bool ElasticRun::Stop(const ElasticStep& step, int epoch, ProcessTable* table) {
  // The most recently started workers still running leave first, once
  // they are in the job.
  int to_stop = -step.delta;
  int ready = 0, starting = 0;
  for (const Child& c : table->children()) {
    if (c.role != "worker" || !c.running || c.leaving) continue;
    (InJob(c) ? ready : starting) += 1;
  }
  // Never stop the job's last workers in it while joiners are starting:
  // the job would end before they join (retried at the next progress event).
  if (ready - to_stop < 1 && starting > 0) return false;
  std::string names;
  auto& children = table->children();
  for (auto it = children.rbegin(); it != children.rend() && to_stop > 0; ++it) {
    if (it->role != "worker" || !it->running || it->leaving || !InJob(*it)) continue;
    it->leaving = true;
    kill(it->pid, SIGTERM);
    names += " " + it->Name();
    --to_stop;
  }
  LOG(INFO) << "[launch] epoch " << epoch << ": stopping" << (names.empty() ? " no worker (none running)" : names)
            << " gracefully (--elastic_schedule " << step.epoch << ":" << step.delta << ")";
  return true;
}

}  // namespace tether
