#include "input/drifting_xmc.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <random>

#include "core/file_util.h"
#include "core/partition.h"

namespace tether {
namespace {

std::vector<uint32_t> DistinctIds(const std::vector<std::vector<uint32_t>>& lists) {
  std::vector<uint32_t> ids;
  for (const auto& l : lists) ids.insert(ids.end(), l.begin(), l.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

std::vector<uint32_t> Minus(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b) {
  std::vector<uint32_t> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

}  // namespace

Status ValidateDriftingStream(const SyntheticXmcOptions& g, const DriftingStreamOptions& s) {
  TETHER_RETURN_IF_ERROR(ValidateSyntheticXmcOptions(g));
  auto bad = [](const std::string& what) { return Status::InvalidArgument("drifting stream: " + what); };
  if (g.feature_id_bits != 64) {
    return bad("feature ids must be 64-bit (new ids pass the F a 32-bit file's header announces; read the "
               "stream with data.hashed_features: true)");
  }
  if (s.files < 1 || s.files > 100000) return bad("files must be in [1, 100000]");
  if (!(s.new_id_share >= 0 && s.new_id_share < 1)) return bad("new_id_share must be in [0, 1)");
  if (s.new_id_share > 0 && s.files < 2) return bad("new ids need at least 2 files");
  if (s.train_rows < s.files) return bad("train_rows must be at least the number of files");
  if (s.test_rows < 1) return bad("test_rows must be >= 1");
  return Status::OK();
}

DriftingXmcStream::DriftingXmcStream(const SyntheticXmcOptions& generator, const DriftingStreamOptions& stream)
    : gen_options_(generator),
      options_(stream),
      gen_(generator),
      next_fresh_(static_cast<uint64_t>(generator.num_features)) {
  CHECK(ValidateDriftingStream(generator, stream).ok()) << ValidateDriftingStream(generator, stream).message();
}

StatusOr<std::vector<DriftingFileStats>> DriftingXmcStream::Write(const std::string& prefix) {
  std::vector<DriftingFileStats> out;
  const int64_t per_file = options_.train_rows / options_.files, extra = options_.train_rows % options_.files;
  const int width = std::max<int>(3, static_cast<int>(std::to_string(options_.files - 1).size()));
  for (int t = 0; t <= options_.files; ++t) {
    const bool test = t == options_.files;
    DriftingFileStats stats;
    stats.rows = test ? options_.test_rows : per_file + (t < extra ? 1 : 0);
    std::string number = std::to_string(t);
    number.insert(0, static_cast<size_t>(std::max<int>(0, width - static_cast<int>(number.size()))), '0');
    stats.path = prefix + (test ? ".test.txt" : ".train." + number + ".txt");
    std::vector<Row> rows(static_cast<size_t>(stats.rows));
    for (Row& r : rows) gen_.NextRow(&r.labels, &r.features, &r.values);
    ApplyRenames(&rows);
    if (t > 0 && !test) TETHER_RETURN_IF_ERROR(Drift(t, stats.path, &rows));
    std::vector<std::vector<uint32_t>> lists;
    for (const Row& r : rows) lists.push_back(r.features);
    const std::vector<uint32_t> ids = DistinctIds(lists);
    stats.distinct_ids = static_cast<int64_t>(ids.size());
    stats.new_ids = static_cast<int64_t>(Minus(ids, seen_).size());
    if (!test) {
      std::vector<uint32_t> merged;
      std::set_union(seen_.begin(), seen_.end(), ids.begin(), ids.end(), std::back_inserter(merged));
      seen_ = std::move(merged);
    }
    TETHER_RETURN_IF_ERROR(WriteRows(rows, stats.path));
    out.push_back(std::move(stats));
  }
  return out;
}

Status DriftingXmcStream::Drift(int file, const std::string& path, std::vector<Row>* rows) {
  std::vector<std::vector<uint32_t>> features, labels;
  for (const Row& r : *rows) {
    features.push_back(r.features);
    labels.push_back(r.labels);
  }
  const std::vector<uint32_t> ids = DistinctIds(features);
  const std::vector<uint32_t> fresh_by_chance = Minus(ids, seen_);
  const std::vector<uint32_t> known = Minus(ids, fresh_by_chance);
  const int64_t want = std::llround(options_.new_id_share * static_cast<double>(ids.size()));
  const int64_t have = static_cast<int64_t>(fresh_by_chance.size());
  std::mt19937_64 rng(MixKey(gen_options_.seed ^ (uint64_t{0x6472696674} << 20) ^ static_cast<uint64_t>(file)));
  if (have < want) {
    // Rename known ids to fresh ones, the signature features of the file's
    // labels first (in a random order), then any other.
    std::vector<uint32_t> signature;
    for (uint32_t l : DistinctIds(labels))
      for (int64_t j = 0; j < gen_options_.features_per_label; ++j)
        signature.push_back(CurrentId(gen_.SignatureFeature(l, j)));
    signature = DistinctIds({signature});
    std::vector<uint32_t> first, rest;
    std::set_intersection(known.begin(), known.end(), signature.begin(), signature.end(), std::back_inserter(first));
    rest = Minus(known, first);
    std::shuffle(first.begin(), first.end(), rng);
    std::shuffle(rest.begin(), rest.end(), rng);
    first.insert(first.end(), rest.begin(), rest.end());
    const int64_t k = std::min<int64_t>(want - have, static_cast<int64_t>(first.size()));
    if (next_fresh_ + static_cast<uint64_t>(k) > (uint64_t{1} << 32) - 1) {
      return Status::ResourceExhausted(path + ": new feature ids would pass 2^32 - 1 generator features");
    }
    for (int64_t i = 0; i < k; ++i) rename_[first[i]] = static_cast<uint32_t>(next_fresh_++);
  } else if (have > want) {
    // Fold chance-new ids onto known ids that this file lacks.
    std::vector<uint32_t> targets;
    for (uint32_t id : Minus(seen_, ids))
      if (!rename_.count(id)) targets.push_back(id);
    std::vector<uint32_t> fold = fresh_by_chance;
    std::shuffle(fold.begin(), fold.end(), rng);
    std::shuffle(targets.begin(), targets.end(), rng);
    const int64_t k = std::min<int64_t>(have - want, static_cast<int64_t>(targets.size()));
    for (int64_t i = 0; i < k; ++i) rename_[fold[i]] = targets[i];
  }
  ApplyRenames(rows);
  return Status::OK();
}

uint32_t DriftingXmcStream::CurrentId(uint32_t f) const {
  // A retired id's replacement may itself retire later: follow the chain
  // (one link per file at most).
  for (auto it = rename_.find(f); it != rename_.end(); it = rename_.find(f)) f = it->second;
  return f;
}

void DriftingXmcStream::ApplyRenames(std::vector<Row>* rows) const {
  if (rename_.empty()) return;
  std::vector<std::pair<uint32_t, float>> row;
  for (Row& r : *rows) {
    row.clear();
    for (size_t i = 0; i < r.features.size(); ++i) row.emplace_back(CurrentId(r.features[i]), r.values[i]);
    std::sort(row.begin(), row.end());
    r.features.clear();
    r.values.clear();
    double sq = 0;
    for (size_t i = 0; i < row.size(); ++i) {
      if (!r.features.empty() && r.features.back() == row[i].first) {
        r.values.back() += row[i].second;
      } else {
        r.features.push_back(row[i].first);
        r.values.push_back(row[i].second);
      }
    }
    for (float v : r.values) sq += static_cast<double>(v) * v;
    const float inv = static_cast<float>(1.0 / std::sqrt(sq));
    if (r.features.size() != row.size()) {
      for (float& v : r.values) v *= inv;
    }
  }
}

Status DriftingXmcStream::WriteRows(const std::vector<Row>& rows, const std::string& path) {
  TETHER_ASSIGN_OR_RETURN(AtomicFile out, AtomicFile::Create(path));
  // The header's F: every generator feature a file of the stream can hold so far.
  std::string text = std::to_string(rows.size()) + " " + std::to_string(next_fresh_) + " " +
                     std::to_string(gen_options_.num_labels) + "\n";
  constexpr size_t kFlushBytes = size_t{1} << 20;
  for (const Row& r : rows) {
    gen_.AppendXmcRow(r.labels, r.features, r.values, &text);
    if (text.size() >= kFlushBytes) {
      TETHER_RETURN_IF_ERROR(out.Append(text));
      text.clear();
    }
  }
  TETHER_RETURN_IF_ERROR(out.Append(text));
  return out.Commit();
}

}  // namespace tether
