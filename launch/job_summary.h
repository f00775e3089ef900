// The end of a launched job that ran to completion: a diverged loss, and
// the one-line summary on stdout (scripts read it), naming the headline
// metrics of the file the evaluating worker wrote, the train time and where
// the file is; the file's whole JSON only when asked (--print_metrics).
//
// Ownership: borrows the summary.
// Thread-safety: no shared state.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tether {

struct JobSummary {
  std::string metrics_out;            // "" = no metrics file was asked for
  bool print_metrics = false;         // print the file's JSON before the summary line
  std::vector<std::string> diverged;  // names of the workers that exited kExitDiverged
  std::vector<std::string> partial_eval;  // the evaluator, when it exited kExitPartialEval
  int num_servers = 0;
  int num_workers = 0;
  std::chrono::steady_clock::duration wall{};  // the job's wall time
};

/// With print_metrics, prints "metrics (FILE):" and the file's JSON (2-space
/// indent) on stdout; warns when the file says "diverged" or lists what the
/// user "accepted"; then prints "tether-launch: job finished: P@1 0.614, P@3
/// ..., train 4.3 s, wall 0:00:05, 2 server(s), 2 worker(s); metrics in
/// FILE" (HeadlineMetrics) or, when the evaluation covered part of the test
/// set or a worker's loss diverged, the line saying so. Returns the exit
/// code: 0; 1 when the metrics file is missing or not JSON (logged);
/// kExitPartialEval (4) when the evaluator exited so;
/// kExitDiverged (3) when a worker diverged.
int PrintJobSummary(const JobSummary& summary);

/// The headline of a metrics JSON object, for the summary line: P@1, P@3,
/// P@5 and nDCG@5 (multi-label), accuracy, AUC and log loss (binary or
/// multi-class), each the keys present and numeric, with 4 decimals, then
/// "train S s" from train_seconds; e.g. "P@1 0.6135, P@3 0.3848, P@5
/// 0.2845, nDCG@5 0.6107, train 4.3 s". "" when none is present.
std::string HeadlineMetrics(const nlohmann::json& metrics);

}  // namespace tether
