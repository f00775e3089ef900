// WriteOneShardCheckpoint: a checkpoint folder holding one shard's tables
// (server/table_checkpoint.h), its budget state when a table keeps one
// (server/table_budget_checkpoint.h) and a MANIFEST for a one-server,
// one-worker job at `clock`, for unit tests that write tables and read
// them back.
//
// Errors: those of the writers; Internal when `budget_required` and no
// table kept budget state. Thread-safety: none (a test's own thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "server/table.h"
#include "server/table_budget_checkpoint.h"
#include "server/table_checkpoint.h"

namespace tether::testing {

inline Status WriteOneShardCheckpoint(const std::string& dir, int64_t clock,
                                      const std::vector<std::unique_ptr<ServerTable>>& shard,
                                      bool budget_required) {
  CheckpointManifest m;
  m.set_format_version(kCheckpointFormatVersion);
  m.set_job_id("test");
  m.set_clock(clock);
  m.set_num_servers(1);
  m.set_num_workers(1);
  *m.add_tables() = shard[0]->spec();
  FileSystem* fs = FileSystem::Default();
  TETHER_RETURN_IF_ERROR(WriteShardCheckpoint(fs, dir, 0, 1, clock, shard, m.add_files()));
  CheckpointFile budget;
  TETHER_RETURN_IF_ERROR(WriteShardBudgetState(fs, dir, 0, 1, clock, shard, &budget));
  if (budget.has_name()) {
    *m.add_files() = budget;
  } else if (budget_required) {
    return Status::Internal("no budget file");
  }
  return WriteManifest(fs, dir, m);
}

}  // namespace tether::testing
