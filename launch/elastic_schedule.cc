#include "launch/elastic_schedule.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

namespace tether {
namespace {

bool ParseInt(const std::string& s, long lo, long hi, int* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size() || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

StatusOr<std::vector<ElasticStep>> ParseElasticSchedule(const std::string& text, int num_workers, int max_workers) {
  std::vector<ElasticStep> steps;
  if (text.empty()) return steps;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(begin, end - begin);
    const std::string where = "--elastic_schedule step '" + item + "'";
    const size_t colon = item.find(':');
    ElasticStep step;
    if (colon == std::string::npos || colon + 1 >= item.size() || (item[colon + 1] != '+' && item[colon + 1] != '-'))
      return Status::InvalidArgument(where + ": expected EPOCH:+N or EPOCH:-N (e.g. \"2:+2,4:-1\")");
    if (!ParseInt(item.substr(0, colon), 2, 1000000, &step.epoch))
      return Status::InvalidArgument(where + ": the epoch must be an integer ≥ 2 (epoch 1 starts with "
                                             "cluster.num_workers workers)");
    if (!ParseInt(item.substr(colon + 2), 1, 65536, &step.delta))
      return Status::InvalidArgument(where + ": the count must be an integer ≥ 1");
    if (item[colon + 1] == '-') step.delta = -step.delta;
    steps.push_back(step);
    begin = end + 1;
  }
  std::stable_sort(steps.begin(), steps.end(),
                   [](const ElasticStep& a, const ElasticStep& b) { return a.epoch < b.epoch; });
  int running = num_workers, next_rank = num_workers;
  for (const ElasticStep& s : steps) {
    const std::string where = "--elastic_schedule step " + std::to_string(s.epoch) + ":" +
                              (s.delta > 0 ? "+" : "") + std::to_string(s.delta);
    running += s.delta;
    if (s.delta > 0) next_rank += s.delta;
    if (running < 1)
      return Status::InvalidArgument(where + ": would leave " + std::to_string(running) +
                                     " workers running; at least one must stay");
    if (next_rank > max_workers)
      return Status::InvalidArgument(where + ": would start rank " + std::to_string(next_rank - 1) +
                                     ", beyond cluster.max_workers = " + std::to_string(max_workers) +
                                     " (ranks are never reused; raise cluster.max_workers to at least " +
                                     std::to_string(next_rank) + ")");
  }
  return steps;
}

}  // namespace tether
