#include "launch/job_summary.h"

#include <glog/logging.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

#include "launch/process_table.h"
#include "worker/trainer.h"

namespace tether {

int PrintJobSummary(const JobSummary& summary) {
  const std::string wall = FormatDuration(summary.wall);
  const double wall_s = std::chrono::duration<double>(summary.wall).count();
  const std::string& metrics_out = summary.metrics_out;
  if (!metrics_out.empty()) {
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
    std::printf("metrics (%s):\n%s\n", metrics_out.c_str(), metrics.dump(2).c_str());
    if (metrics.value("diverged", false)) {
      LOG(WARNING) << "[launch] the training loss diverged at epoch " << metrics.value("diverged_at_epoch", 0)
                   << " (\"diverged\" in " << metrics_out << "); the metrics describe a diverged model";
    }
  }
  if (!summary.diverged.empty()) {
    std::string who;
    for (const auto& n : summary.diverged) who += (who.empty() ? "" : ", ") + n;
    std::printf("tether-launch: job finished, but the training loss diverged (%s): exit %d\n", who.c_str(),
                kExitDiverged);
    std::fflush(stdout);
    return kExitDiverged;
  }
  std::printf("tether-launch: job finished: %d server(s), %d worker(s), wall time %s (%.1f s)\n",
              summary.num_servers, summary.num_workers, wall.c_str(), wall_s);
  std::fflush(stdout);
  return 0;
}

}  // namespace tether
