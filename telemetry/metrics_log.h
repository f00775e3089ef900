// MetricsLog: JSON-lines metrics, one object per line, written to
// DIR/NAME.jsonl by every process of a job (workers once per clock and once
// per evaluation, servers once per min-clock advance). tools/plot_metrics.py
// draws loss and P@1 against time from these files.
//
// Every line carries "t" (seconds since the log was opened, steady clock),
// "unix_time" (wall clock, to line up the files of several processes) and
// the role/rank given at Open, plus the caller's fields.
//
// ProgressLine: a throttled, human-readable progress line for long runs.
//
// Ownership: a MetricsLog owns its file and its lock. Thread-safety: none;
// one writer per object (a process has one per role).
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/file_lock.h"
#include "core/output_target.h"
#include "core/status.h"

namespace tether {

class MetricsLog {
 public:
  /// Creates `dir` and its parents if needed and opens a new
  /// DIR/ROLE-RANK.jsonl ("worker-0.jsonl"). A file of that name that holds
  /// lines (an earlier run, or this rank's earlier process) is never
  /// appended to: it is moved to the first free DIR/ROLE-RANK.N.jsonl (N =
  /// 1, 2, …: oldest first) and the move is logged, so each process's lines
  /// plot as a run of their own.
  ///
  /// The output policy of core/output_target.h holds: a symbolic link there
  /// is followed and stays; its final target is the file moved aside (to
  /// TARGET.N.jsonl, or TARGET.N for a name without .jsonl, in the
  /// target's own folder) and written anew. A directory, socket, block or
  /// character device or FIFO there is refused, and so is one of `inputs`
  /// (core/job_inputs.h), before anything moves.
  ///
  /// One live process per file: Open takes an exclusive lock on
  /// DIR/ROLE-RANK.lock (core/file_lock.h) before it moves or opens
  /// anything, and holds it while the log lives, so the processes of one
  /// job (one file each) share a folder while a second process of the same
  /// role and rank is refused.
  /// Errors: InvalidArgument "train.metrics_dir (--metrics_dir)=PATH: WHY"
  /// for a path refused so; FailedPrecondition
  /// "train.metrics_dir (--metrics_dir)=DIR: ROLE-RANK.jsonl: in use by a
  /// live job (pid P on host H, holding DIR/ROLE-RANK.lock): ..."; IOError
  /// naming the path.
  static StatusOr<std::unique_ptr<MetricsLog>> Open(const std::string& dir, const std::string& role, int rank,
                                                    const std::vector<NamedInput>& inputs);
  /// Open's refusals of DIR/ROLE-RANK.jsonl, made at start-up (nothing is
  /// created or moved, no lock kept). Errors: Open's InvalidArgument and
  /// FailedPrecondition.
  [[nodiscard]] static Status CheckPath(const std::string& dir, const std::string& role, int rank,
                                        const std::vector<NamedInput>& inputs);

  /// Appends `fields` plus t, unix_time, role and rank as one line. Lines are
  /// buffered; Flush() (or the destructor) writes them out. A write error is
  /// remembered and returned by Flush().
  void Write(nlohmann::json fields);
  /// Errors: IOError naming the path.
  Status Flush();

  /// Seconds since Open (steady clock).
  double Seconds() const;
  const std::string& path() const { return path_; }
  /// Where Open moved an earlier file of this name ("" when none).
  const std::string& moved_to() const { return moved_to_; }

 private:
  MetricsLog(std::string path, std::string role, int rank);

  std::string path_, role_, moved_to_;
  int rank_;
  FileLock lock_;  // DIR/ROLE-RANK.lock, held while this object lives
  std::ofstream out_;
  std::chrono::steady_clock::time_point start_;
  uint64_t lines_since_flush_ = 0;
};

/// Decides when a progress line is due: Due() is true at most once per
/// `every_s` seconds (never when every_s <= 0). Cheap enough to call once
/// per minibatch (one steady_clock read).
class ProgressTimer {
 public:
  explicit ProgressTimer(double every_s);
  bool Due();

 private:
  double every_s_;
  std::chrono::steady_clock::time_point next_;
};

}  // namespace tether
