#include "input/validation_split.h"

#include <algorithm>
#include <iterator>

namespace tether {
namespace {

// SplitMix64's finaliser (Steele, Lea & Flood, OOPSLA 2014): every input
// bit reaches every output bit, so consecutive lines land independently.
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

bool IsValidationRow(int64_t source_line, double fraction, uint64_t seed) {
  if (!(fraction > 0.0)) return false;
  const uint64_t h = Mix(Mix(seed ^ 0x76616C6964617465ull) + static_cast<uint64_t>(source_line) * 0x9E3779B97F4A7C15ull);
  // The top 53 bits as a double in [0, 1).
  return static_cast<double>(h >> 11) * 0x1.0p-53 < fraction;
}

namespace {

// Moves the rows whose source line `take` accepts out of *train into the
// returned Dataset, both keeping their order.
template <typename Pred>
Dataset TakeRowsIf(Dataset* train, Pred take_line) {
  Dataset val;
  val.features.cols = train->features.cols;
  val.features.col_keys = train->features.col_keys;
  val.labels.cols = train->labels.cols;
  val.feature_names = train->feature_names;
  val.label_names = train->label_names;
  std::vector<int64_t> keep, take;
  for (size_t r = 0; r < train->source_lines.size(); ++r)
    (take_line(train->source_lines[r]) ? take : keep).push_back(static_cast<int64_t>(r));
  if (take.empty()) return val;
  const auto split = [&](const std::vector<int64_t>& rows, Dataset* out) {
    out->features = GatherRows(train->features, rows);
    out->labels = GatherRows(train->labels, rows);
    out->source_lines.clear();
    std::vector<float> targets;
    for (int64_t r : rows) {
      out->source_lines.push_back(train->source_lines[r]);
      if (!train->targets.empty()) targets.push_back(train->targets[r]);
    }
    out->targets = std::move(targets);
  };
  Dataset kept;
  split(take, &val);
  split(keep, &kept);
  train->features = std::move(kept.features);
  train->labels = std::move(kept.labels);
  train->targets = std::move(kept.targets);
  train->source_lines = std::move(kept.source_lines);
  val.rows_read = static_cast<int64_t>(take.size());
  return val;
}

}  // namespace

Dataset TakeValidationRows(Dataset* train, double fraction, uint64_t seed) {
  return TakeRowsIf(train, [&](int64_t line) { return IsValidationRow(line, fraction, seed); });
}

Dataset TakeRowsAtLines(Dataset* train, const std::vector<int64_t>& lines) {
  return TakeRowsIf(train, [&](int64_t line) { return std::binary_search(lines.begin(), lines.end(), line); });
}

std::vector<int64_t> SubtractRows(const std::vector<int64_t>& rows, const std::vector<int64_t>& remove) {
  std::vector<int64_t> out;
  out.reserve(rows.size());
  std::set_difference(rows.begin(), rows.end(), remove.begin(), remove.end(), std::back_inserter(out));
  return out;
}

}  // namespace tether
