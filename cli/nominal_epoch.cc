#include "cli/nominal_epoch.h"

#include <cmath>
#include <string>

#include "core/data_files.h"
#include "core/memory_fit.h"
#include "core/schedule_config.h"
#include "input/arff_reader.h"
#include "input/file_input.h"
#include "input/idx_reader.h"
#include "input/reader.h"
#include "input/validation_split.h"

namespace tether {
namespace {

// A schedule given in epochs, or a decay with no length (it runs to the end
// of training), is resolved against the job's nominal epoch.
bool NeedsEpochs(const LearningRateSchedule& s) {
  return s.has_warmup_epochs() || s.has_decay_epochs() ||
         (s.decay() != LearningRateSchedule::CONSTANT && !s.has_decay_clocks());
}

// Lines holding a row of a LIBSVM file (anything but blanks).
StatusOr<int64_t> CountLibsvmRows(const std::string& path, const MemoryBudget& budget) {
  std::string raw, storage;
  TETHER_RETURN_IF_ERROR(ReadFileBytes(path, &raw, budget));
  TETHER_ASSIGN_OR_RETURN(std::string_view text, DecodeInput(path, raw, &storage, budget));
  int64_t rows = 0;
  bool content = false;
  for (char c : text) {
    if (c == '\n') {
      rows += content ? 1 : 0;
      content = false;
    } else if (c != ' ' && c != '\t' && c != '\r') {
      content = true;
    }
  }
  return rows + (content ? 1 : 0);
}

StatusOr<int64_t> TrainingSplitRows(const JobConfig& c) {
  const DataConfig& d = c.data();
  const MemoryBudget budget = MemoryBudgetFor(c);  // as the worker reads them
  if (!d.train_split().empty()) {
    TETHER_ASSIGN_OR_RETURN(const std::vector<int64_t> rows, ReadSplitFile(d.train_split(), nullptr, budget));
    return static_cast<int64_t>(rows.size());
  }
  if (IsFileList(d.train_file()) || d.streaming())
    return Status::InvalidArgument("config field data.train_file: " +
                                   std::string(d.streaming() ? "is streamed" : "names several files") +
                                   ", so the job's rows are not counted before training: give the learning-rate "
                                   "schedule in clocks (warmup_clocks, decay_clocks)");
  switch (d.format()) {
    case XMC: {
      TETHER_ASSIGN_OR_RETURN(const auto header, ReadXmcHeader(d.train_file()));
      return static_cast<int64_t>(header[0]);
    }
    case IDX: {
      TETHER_ASSIGN_OR_RETURN(const IdxArray a, ReadIdxFile(d.train_file(), budget));
      return a.dims.empty() ? 0 : static_cast<int64_t>(a.dims[0]);
    }
    case ARFF: {
      ReadOptions o;
      o.format = DataFormat::kArff;
      o.label_xml = d.label_xml();
      o.num_features = d.num_features();
      o.num_labels = d.num_labels();
      o.memory_budget = budget;
      TETHER_ASSIGN_OR_RETURN(const Dataset all, ReadDataset(d.train_file(), o));
      return all.features.rows;
    }
    default:
      return CountLibsvmRows(d.train_file(), budget);
  }
}

}  // namespace

StatusOr<int64_t> NominalTrainingRows(const JobConfig& c) {
  const DataConfig& d = c.data();
  const MemoryBudget budget = MemoryBudgetFor(c);
  if (!d.validation_split().empty() && !d.train_split().empty()) {
    // Validation rows outside train_split take nothing from it.
    TETHER_ASSIGN_OR_RETURN(const std::vector<int64_t> train, ReadSplitFile(d.train_split(), nullptr, budget));
    TETHER_ASSIGN_OR_RETURN(const std::vector<int64_t> val, ReadSplitFile(d.validation_split(), nullptr, budget));
    return static_cast<int64_t>(SubtractRows(train, val).size());
  }
  TETHER_ASSIGN_OR_RETURN(int64_t rows, TrainingSplitRows(c));
  if (!d.validation_split().empty()) {
    TETHER_ASSIGN_OR_RETURN(const std::vector<int64_t> val, ReadSplitFile(d.validation_split(), nullptr, budget));
    rows -= static_cast<int64_t>(val.size());
  } else if (c.train().validation_fraction() > 0) {
    rows -= static_cast<int64_t>(std::llround(static_cast<double>(rows) * c.train().validation_fraction()));
  }
  return rows < 0 ? 0 : rows;
}

int64_t NominalClocksPerEpoch(const JobConfig& c, int64_t rows) {
  const int64_t workers = std::max(1, c.cluster().num_workers());
  const int64_t batch = std::max(1, c.train().minibatch_size());
  const int64_t per_clock = std::max(1, c.train().minibatches_per_clock());
  const int64_t share = (rows + workers - 1) / workers;
  const int64_t minibatches = (share + batch - 1) / batch;
  return std::max<int64_t>(1, (minibatches + per_clock - 1) / per_clock);
}

Status ResolveScheduleClocks(JobConfig* config) {
  bool any = NeedsEpochs(config->optimizer().schedule());
  for (const TableConfig& t : config->table()) any = any || NeedsEpochs(t.optimizer().schedule());
  if (!any) return Status::OK();
  TETHER_ASSIGN_OR_RETURN(const int64_t rows, NominalTrainingRows(*config));
  const int64_t per_epoch = NominalClocksPerEpoch(*config, rows);
  const int epochs = config->train().epochs();
  if (config->optimizer().has_schedule())
    TETHER_RETURN_IF_ERROR(
        ResolveScheduleEpochs(config->mutable_optimizer()->mutable_schedule(), per_epoch, epochs, "optimizer.schedule"));
  for (TableConfig& t : *config->mutable_table()) {
    if (!t.optimizer().has_schedule()) continue;
    TETHER_RETURN_IF_ERROR(ResolveScheduleEpochs(t.mutable_optimizer()->mutable_schedule(), per_epoch, epochs,
                                                 "table[" + t.name() + "].optimizer.schedule"));
  }
  return Status::OK();
}

}  // namespace tether
