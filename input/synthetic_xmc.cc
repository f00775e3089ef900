#include "input/synthetic_xmc.h"

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "core/file_util.h"
#include "core/partition.h"

namespace tether {
namespace {

std::vector<double> PowerLawCdf(int64_t n, double exponent) {
  std::vector<double> cdf(static_cast<size_t>(n));
  double sum = 0;
  for (int64_t r = 0; r < n; ++r) {
    sum += std::pow(static_cast<double>(r + 1), -exponent);
    cdf[r] = sum;
  }
  for (double& c : cdf) c /= sum;
  cdf.back() = 1.0;
  return cdf;
}

std::vector<uint32_t> Permutation(int64_t n, std::mt19937_64* rng) {
  std::vector<uint32_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0u);
  std::shuffle(p.begin(), p.end(), *rng);
  return p;
}

}  // namespace

Status ApplySyntheticShape(const std::string& shape, SyntheticXmcOptions* o, int64_t* train_rows,
                           int64_t* test_rows) {
  // Features, labels, train/test rows and labels per row as the Extreme
  // Classification Repository lists them; non-zeros per row are rounded.
  if (shape == "eurlex4k") {
    o->num_features = 5000;
    o->num_labels = 3993;
    o->features_per_row = 236;
    o->labels_per_row = 5.31;
    *train_rows = 15539;
    *test_rows = 3809;
  } else if (shape == "wiki10-31k") {
    o->num_features = 101938;
    o->num_labels = 30938;
    o->features_per_row = 673;
    o->labels_per_row = 18.64;
    *train_rows = 14146;
    *test_rows = 6616;
  } else if (shape == "amazon670k") {
    o->num_features = 135909;
    o->num_labels = 670091;
    o->features_per_row = 75;
    o->labels_per_row = 5.45;
    *train_rows = 490449;
    *test_rows = 153025;
  } else {
    return Status::InvalidArgument("unknown synthetic shape '" + shape +
                                   "'; known: eurlex4k, wiki10-31k, amazon670k");
  }
  return Status::OK();
}

Status ValidateSyntheticXmcOptions(const SyntheticXmcOptions& o) {
  auto bad = [](const std::string& what) { return Status::InvalidArgument("synthetic XMC: " + what); };
  if (o.num_features < 1 || o.num_features > (int64_t{1} << 32) - 1) return bad("num_features must be in [1, 2^32)");
  if (o.num_labels < 1 || o.num_labels > (int64_t{1} << 32) - 1) return bad("num_labels must be in [1, 2^32)");
  if (!(o.features_per_row >= 1)) return bad("features_per_row must be >= 1");
  if (!(o.labels_per_row >= 1)) return bad("labels_per_row must be >= 1");
  if (!(o.label_exponent >= 0) || !(o.feature_exponent >= 0)) return bad("exponents must be >= 0");
  if (o.features_per_label < 1) return bad("features_per_label must be >= 1");
  if (!(o.signal_fraction >= 0 && o.signal_fraction <= 1)) return bad("signal_fraction must be in [0, 1]");
  if (o.feature_id_bits != 32 && o.feature_id_bits != 64) return bad("feature_id_bits must be 32 or 64");
  return Status::OK();
}

SyntheticXmcGenerator::SyntheticXmcGenerator(const SyntheticXmcOptions& options) : o_(options), rng_(options.seed) {
  CHECK(ValidateSyntheticXmcOptions(o_).ok()) << ValidateSyntheticXmcOptions(o_).message();
  label_cdf_ = PowerLawCdf(o_.num_labels, o_.label_exponent);
  feature_cdf_ = PowerLawCdf(o_.num_features, o_.feature_exponent);
  label_ids_ = Permutation(o_.num_labels, &rng_);
  feature_ids_ = Permutation(o_.num_features, &rng_);
}

uint32_t SyntheticXmcGenerator::DrawPowerLaw(const std::vector<double>& cdf, const std::vector<uint32_t>& ids) {
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  const size_t r = static_cast<size_t>(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
  return ids[std::min(r, ids.size() - 1)];
}

void SyntheticXmcGenerator::NextRow(std::vector<uint32_t>* labels, std::vector<uint32_t>* features,
                                    std::vector<float>* values) {
  const int64_t k = std::min<int64_t>(
      o_.num_labels, 1 + std::poisson_distribution<int64_t>(o_.labels_per_row - 1)(rng_));
  labels->clear();
  while (static_cast<int64_t>(labels->size()) < k) {
    const uint32_t l = DrawPowerLaw(label_cdf_, label_ids_);
    if (std::find(labels->begin(), labels->end(), l) == labels->end()) labels->push_back(l);
  }
  const int64_t m = 1 + std::poisson_distribution<int64_t>(o_.features_per_row - 1)(rng_);
  draws_.clear();
  std::bernoulli_distribution from_signal(o_.signal_fraction);
  std::uniform_int_distribution<size_t> which_label(0, labels->size() - 1);
  std::uniform_int_distribution<int64_t> which_feature(0, o_.features_per_label - 1);
  for (int64_t i = 0; i < m; ++i) {
    if (from_signal(rng_)) {
      const uint64_t l = (*labels)[which_label(rng_)];
      draws_.push_back(SignatureFeature(l, which_feature(rng_)));
    } else {
      draws_.push_back(DrawPowerLaw(feature_cdf_, feature_ids_));
    }
  }
  std::sort(labels->begin(), labels->end());
  std::sort(draws_.begin(), draws_.end());
  features->clear();
  values->clear();
  double sq = 0;
  for (size_t i = 0; i < draws_.size();) {
    size_t j = i;
    while (j < draws_.size() && draws_[j] == draws_[i]) ++j;
    features->push_back(draws_[i]);
    values->push_back(static_cast<float>(j - i));
    sq += static_cast<double>(j - i) * (j - i);
    i = j;
  }
  const float inv = static_cast<float>(1.0 / std::sqrt(sq));
  for (float& v : *values) v *= inv;
}

uint32_t SyntheticXmcGenerator::SignatureFeature(uint64_t label, int64_t j) const {
  return static_cast<uint32_t>(MixKey(MixKey(o_.seed ^ (label << 20)) + static_cast<uint64_t>(j)) %
                               static_cast<uint64_t>(o_.num_features));
}

void SyntheticXmcGenerator::AppendXmcRow(const std::vector<uint32_t>& labels, const std::vector<uint32_t>& features,
                                         const std::vector<float>& values, std::string* text) const {
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) *text += ',';
    *text += std::to_string(labels[i]);
  }
  std::vector<std::pair<uint64_t, float>> ids;  // (written id, value), ascending id
  ids.reserve(features.size());
  for (size_t i = 0; i < features.size(); ++i) ids.emplace_back(FeatureId(features[i]), values[i]);
  std::sort(ids.begin(), ids.end());
  char buf[48];
  for (const auto& [id, value] : ids) {
    // Six significant digits: values survive the text round trip to ~1e-6.
    std::snprintf(buf, sizeof(buf), " %llu:%.6g", static_cast<unsigned long long>(id), value);
    *text += buf;
  }
  *text += '\n';
}

uint64_t SyntheticXmcGenerator::FeatureId(uint32_t f) const {
  if (o_.feature_id_bits != 64) return f;
  return MixKey(uint64_t{f} + MixKey(o_.seed ^ 0x68617368ull));  // "hash"
}

void SyntheticXmcGenerator::Generate(int64_t rows, CsrMatrix* features, CsrMatrix* labels) {
  *features = CsrMatrix();
  *labels = CsrMatrix();
  features->cols = o_.num_features;
  labels->cols = o_.num_labels;
  std::vector<uint32_t> l, f;
  std::vector<float> v, ones;
  for (int64_t r = 0; r < rows; ++r) {
    NextRow(&l, &f, &v);
    features->AppendRow(f.data(), v.data(), f.size());
    ones.assign(l.size(), 1.0f);
    labels->AppendRow(l.data(), ones.data(), l.size());
  }
  features->rows = rows;
  labels->rows = rows;
}

Status SyntheticXmcGenerator::WriteXmcFile(int64_t rows, const std::string& path) {
  // Atomic, so an interrupted generator never leaves a short file that a
  // later run would read as a smaller data set.
  TETHER_ASSIGN_OR_RETURN(AtomicFile out, AtomicFile::Create(path));
  std::string text = std::to_string(rows) + " " + std::to_string(o_.num_features) + " " +
                     std::to_string(o_.num_labels) + "\n";
  std::vector<uint32_t> l, f;
  std::vector<float> v;
  constexpr size_t kFlushBytes = size_t{1} << 20;  // few write calls, bounded memory
  for (int64_t r = 0; r < rows; ++r) {
    NextRow(&l, &f, &v);
    AppendXmcRow(l, f, v, &text);
    if (text.size() >= kFlushBytes) {
      TETHER_RETURN_IF_ERROR(out.Append(text));
      text.clear();
    }
  }
  TETHER_RETURN_IF_ERROR(out.Append(text));
  return out.Commit();
}

}  // namespace tether
