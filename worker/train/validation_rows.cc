#include "worker/train/validation_rows.h"

#include <algorithm>
#include <iterator>
#include <vector>

#include "core/memory_fit.h"
#include "input/validation_split.h"
#include "worker/train/training_data.h"

namespace tether {

StatusOr<Dataset> TakeValidationShare(const JobConfig& config, int rank, int num_workers, Dataset* train) {
  const DataConfig& d = config.data();
  if (d.validation_split().empty())
    return TakeValidationRows(train, config.train().validation_fraction(), config.train().validation_seed());
  // Read whole: every worker must leave out every validation row of its
  // partition, not only those of its own share.
  TETHER_ASSIGN_OR_RETURN(Dataset all, LoadSplit(config, d.train_file(), d.train_label_file(), d.validation_split(), 0, 1));
  TakeRowsAtLines(train, all.source_lines);
  const auto rows = static_cast<int64_t>(all.source_lines.size());
  const int64_t lo = rows * rank / num_workers, hi = rows * (rank + 1) / num_workers;
  const std::vector<int64_t> mine(all.source_lines.begin() + lo, all.source_lines.begin() + hi);
  return TakeRowsAtLines(&all, mine);
}

StatusOr<int64_t> ValidationRowsInTestSplit(const JobConfig& config) {
  const DataConfig& d = config.data();
  if (d.validation_split().empty() || d.test_split().empty() || d.test_file() != d.train_file()) return 0;
  const MemoryBudget budget = MemoryBudgetFor(config);
  TETHER_ASSIGN_OR_RETURN(const std::vector<int64_t> validation,
                          ReadSplitFile(d.validation_split(), nullptr, budget));
  TETHER_ASSIGN_OR_RETURN(const std::vector<int64_t> test, ReadSplitFile(d.test_split(), nullptr, budget));
  std::vector<int64_t> shared;  // both sorted ascending
  std::set_intersection(validation.begin(), validation.end(), test.begin(), test.end(), std::back_inserter(shared));
  return static_cast<int64_t>(shared.size());
}

StatusOr<Dataset> JobTrainingRows(const JobConfig& config) {
  const DataConfig& d = config.data();
  TETHER_ASSIGN_OR_RETURN(Dataset train, LoadSplit(config, d.train_file(), d.train_label_file(), d.train_split(), 0, 1));
  // Validation rows are chosen by their line in the file, so the whole
  // split loses the rows every worker's partition lost.
  TETHER_RETURN_IF_ERROR(TakeValidationShare(config, 0, 1, &train).status());
  return train;
}

}  // namespace tether
