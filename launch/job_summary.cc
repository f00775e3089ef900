#include "launch/job_summary.h"

#include <glog/logging.h>
#include <sys/stat.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

#include "launch/process_table.h"
#include "worker/trainer.h"

namespace tether {

std::string HeadlineMetrics(const nlohmann::json& metrics) {
  static const std::pair<const char*, const char*> kHeadline[] = {
      {"precision_at_1", "P@1"}, {"precision_at_3", "P@3"}, {"precision_at_5", "P@5"},
      {"ndcg_at_5", "nDCG@5"},   {"accuracy", "accuracy"},  {"auc", "AUC"},
      {"log_loss", "log loss"}};
  std::string out;
  char buf[64];
  for (const auto& [key, name] : kHeadline) {
    const auto it = metrics.find(key);
    if (it == metrics.end() || !it->is_number()) continue;
    std::snprintf(buf, sizeof(buf), "%s %.4f", name, it->get<double>());
    out += (out.empty() ? "" : ", ") + std::string(buf);
  }
  if (const auto it = metrics.find("train_seconds"); it != metrics.end() && it->is_number()) {
    std::snprintf(buf, sizeof(buf), "train %.1f s", it->get<double>());
    out += (out.empty() ? "" : ", ") + std::string(buf);
  }
  return out;
}

int PrintJobSummary(const JobSummary& summary) {
  const std::string wall = FormatDuration(summary.wall);
  const double wall_s = std::chrono::duration<double>(summary.wall).count();
  const std::string& metrics_out = summary.metrics_out;
  std::string headline;
  std::string workers = std::to_string(summary.num_workers) + " worker(s)";
  struct stat st {};
  const bool written_through = !metrics_out.empty() && ::stat(metrics_out.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
  if (written_through) {
    // A character device or FIFO (/dev/null, a pipe) is written through; it
    // cannot be read back.
    LOG(INFO) << "[launch] metrics written through to " << metrics_out << " (not a regular file: not read back)";
  } else if (!metrics_out.empty()) {
    std::ifstream in(metrics_out);
    if (!in) {
      LOG(ERROR) << "[launch] job finished but the evaluating worker (rank 0, or the lowest rank left) wrote no metrics file "
                 << metrics_out;
      return 1;
    }
    nlohmann::json metrics = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (metrics.is_discarded()) {
      LOG(ERROR) << "[launch] " << metrics_out << ": not valid JSON";
      return 1;
    }
    if (summary.print_metrics) std::printf("metrics (%s):\n%s\n", metrics_out.c_str(), metrics.dump(2).c_str());
    headline = HeadlineMetrics(metrics);
    // Elastic jobs: workers that joined later have entries of their own.
    if (const auto it = metrics.find("workers"); it != metrics.end() && it->is_array() &&
                                                 static_cast<int>(it->size()) > summary.num_workers) {
      workers = std::to_string(it->size()) + " worker(s) (" + std::to_string(summary.num_workers) + " at the start)";
    }
    if (metrics.value("diverged", false)) {
      LOG(WARNING) << "[launch] the training loss diverged at epoch " << metrics.value("diverged_at_epoch", 0)
                   << " (\"diverged\" in " << metrics_out << "); the metrics describe a diverged model";
    }
    if (metrics.contains("accepted"))
      LOG(WARNING) << "[launch] accepted by the job's config: " << metrics["accepted"].dump() << " (\"accepted\" in "
                   << metrics_out << ")";
  }
  if (!summary.partial_eval.empty()) {
    std::printf("tether-launch: job finished, but its evaluation covered only part of the test set (%s; "
                "--accept_partial_eval accepts that): exit %d\n",
                summary.partial_eval.front().c_str(), kExitPartialEval);
    std::fflush(stdout);
    return kExitPartialEval;
  }
  if (!summary.diverged.empty()) {
    std::string who;
    for (const auto& n : summary.diverged) who += (who.empty() ? "" : ", ") + n;
    std::printf("tether-launch: job finished, but the training loss diverged (%s): exit %d\n", who.c_str(),
                kExitDiverged);
    std::fflush(stdout);
    return kExitDiverged;
  }
  // One line: what the job reached, how long it took, where the rest is.
  std::printf("tether-launch: job finished: %s%swall time %s (%.1f s), %d server(s), %s%s\n", headline.c_str(),
              headline.empty() ? "" : ", ", wall.c_str(), wall_s, summary.num_servers, workers.c_str(),
              metrics_out.empty() ? "" : ("; metrics in " + metrics_out).c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace tether
