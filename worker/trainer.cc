#include "worker/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/metrics.h"
#include "sparse/backend.h"
#include "sparse/reader.h"
#include "worker/client.h"
#include "worker/xmc_mlp.h"

namespace tether {
namespace {

using SteadyClock = std::chrono::steady_clock;

double SecondsSince(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

constexpr uint32_t kW1 = 0, kB1 = 1, kW2 = 2;

void NormalizeRows(CsrMatrix* m) {
  for (int64_t r = 0; r < m->rows; ++r) {
    double sq = 0;
    for (int64_t p = m->row_ptr[r]; p < m->row_ptr[r + 1]; ++p) sq += double{m->values[p]} * m->values[p];
    if (sq <= 0) continue;
    const float inv = static_cast<float>(1.0 / std::sqrt(sq));
    for (int64_t p = m->row_ptr[r]; p < m->row_ptr[r + 1]; ++p) m->values[p] *= inv;
  }
}

StatusOr<Dataset> LoadSplit(const JobConfig& config, const std::string& file, const std::string& split,
                            int partition, int num_partitions) {
  ReadOptions opts;
  opts.format = config.data().format() == XMC ? DataFormat::kXmc : DataFormat::kLibsvm;
  opts.index_base = config.data().index_base();
  opts.partition = partition;
  opts.num_partitions = num_partitions;
  std::vector<int64_t> subset;
  if (!split.empty()) {
    TETHER_ASSIGN_OR_RETURN(subset, ReadSplitFile(split));
    opts.row_subset = &subset;
  }
  if (opts.format == DataFormat::kLibsvm) {
    opts.num_features = config.data().num_features();
    opts.num_labels = config.data().num_labels();
  }
  TETHER_ASSIGN_OR_RETURN(Dataset d, ReadDataset(file, opts));
  if (config.data().normalize_rows()) NormalizeRows(&d.features);
  if (d.features.cols != config.data().num_features())
    return Status::InvalidArgument(file + ": has " + std::to_string(d.features.cols) +
                                   " features but config field data.num_features is " +
                                   std::to_string(config.data().num_features()));
  if (d.labels.cols != config.data().num_labels())
    return Status::InvalidArgument(file + ": has " + std::to_string(d.labels.cols) +
                                   " labels but config field data.num_labels is " +
                                   std::to_string(config.data().num_labels()));
  return d;
}

// Parameters of the XMC MLP as pulled from the servers, with the buffers
// reused across minibatches (no per-minibatch allocation after warm-up).
class ModelBuffers {
 public:
  ModelBuffers(int64_t hidden, int64_t labels)
      : h_(hidden), l_(labels), b1_(hidden), w2_full_(labels * (hidden + 1)), w2_(labels * hidden), b2_(labels),
        w2_grad_full_(labels * (hidden + 1)) {
    label_keys_.resize(labels);
    std::iota(label_keys_.begin(), label_keys_.end(), 0);
  }

  // Issues the three pulls for a minibatch whose features are `keys`.
  Status Pull(WorkerClient* client, const std::vector<uint64_t>& keys) {
    w1_.resize(keys.size() * h_);
    const int64_t t1 = client->PullRows(kW1, keys, w1_.data());
    const int64_t t2 = client->PullDense(kB1, b1_.data());
    const int64_t t3 = client->PullRows(kW2, label_keys_, w2_full_.data());
    TETHER_RETURN_IF_ERROR(client->Wait(t1));
    TETHER_RETURN_IF_ERROR(client->Wait(t2));
    TETHER_RETURN_IF_ERROR(client->Wait(t3));
    // w2 rows are [weights(H), bias]: split into the model's L×H and L.
    for (int64_t l = 0; l < l_; ++l) {
      std::copy_n(&w2_full_[l * (h_ + 1)], h_, &w2_[l * h_]);
      b2_[l] = w2_full_[l * (h_ + 1) + h_];
    }
    return Status::OK();
  }

  XmcParams Params(int64_t num_rows_w1) const {
    return XmcParams{w1_.data(), num_rows_w1, b1_.data(), w2_.data(), b2_.data()};
  }

  void Push(WorkerClient* client, const std::vector<uint64_t>& keys, const XmcGrads& g) {
    for (int64_t l = 0; l < l_; ++l) {
      std::copy_n(&g.w2[l * h_], h_, &w2_grad_full_[l * (h_ + 1)]);
      w2_grad_full_[l * (h_ + 1) + h_] = g.b2[l];
    }
    client->PushRows(kW1, keys, g.w1.data());
    client->PushDense(kB1, g.b1.data());
    client->PushRows(kW2, label_keys_, w2_grad_full_.data());
  }

 private:
  int64_t h_, l_;
  std::vector<float> w1_, b1_, w2_full_, w2_, b2_, w2_grad_full_;
  std::vector<uint64_t> label_keys_;
};

Status Evaluate(const JobConfig& config, const Dataset& test, WorkerClient* client, XmcMlp* model,
                ModelBuffers* buffers, TrainReport* report) {
  RankingMetrics metrics({1, 3, 5});
  std::vector<uint64_t> keys;
  CsrMatrix x_local;
  std::vector<float> scores;
  const int64_t bs = config.train().eval_minibatch_size();
  const int64_t num_labels = config.data().num_labels();
  for (int64_t b = 0; b < test.features.rows; b += bs) {
    const int64_t e = std::min(test.features.rows, b + bs);
    LocalizeBatch(test.features, b, e, &keys, &x_local);
    TETHER_RETURN_IF_ERROR(buffers->Pull(client, keys));
    TETHER_RETURN_IF_ERROR(model->Predict(x_local, buffers->Params(static_cast<int64_t>(keys.size())), &scores));
    CsrMatrix y = SliceRows(test.labels, b, e);
    metrics.Add(scores.data(), e - b, num_labels, y.row_ptr.data(), y.col_idx.data());
  }
  for (int k : {1, 3, 5}) {
    report->precision_at[k] = metrics.PrecisionAt(k);
    report->ndcg_at[k] = metrics.NdcgAt(k);
  }
  report->test_rows = metrics.count();
  return Status::OK();
}

}  // namespace

StatusOr<TrainReport> RunWorker(const JobConfig& config, const TrainerOptions& options) {
  const int rank = options.rank;
  const int num_workers = config.cluster().num_workers();
  const std::string who = "[worker " + std::to_string(rank) + "] ";
  TrainReport report;

  const auto load_start = SteadyClock::now();
  TETHER_ASSIGN_OR_RETURN(Dataset train, LoadSplit(config, config.data().train_file(), config.data().train_split(),
                                                   rank, num_workers));
  Dataset test;
  if (rank == 0) {
    const std::string& test_file = config.data().test_file().empty() ? config.data().train_file()
                                                                     : config.data().test_file();
    TETHER_ASSIGN_OR_RETURN(test, LoadSplit(config, test_file, config.data().test_split(), 0, 1));
  }
  report.train_rows = train.features.rows;
  LOG(INFO) << who << "read " << train.features.rows << " training rows (" << train.features.nnz()
            << " non-zeros) in " << SecondsSince(load_start) << " s"
            << (rank == 0 ? ", " + std::to_string(test.features.rows) + " test rows" : "");
  if (train.features.rows == 0)
    return Status::InvalidArgument(who + "partition " + std::to_string(rank) + " of " +
                                   config.data().train_file() + " has no rows; use fewer workers");

  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend,
                          CreateBackend(config.train().device(), config.train().threads()));
  LOG(INFO) << who << "compute backend " << backend->name();
  XmcMlpShape shape;
  shape.num_features = config.data().num_features();
  shape.hidden = config.model().hidden();
  shape.num_labels = config.data().num_labels();
  shape.loss = config.model().loss() == BCE ? XmcLoss::kBce : XmcLoss::kSoftmax;
  XmcMlp model(shape, backend.get());

  ClientOptions copts;
  copts.rank = rank;
  copts.servers = options.servers;
  copts.staleness = config.consistency().staleness();
  copts.tables = TablesForJob(config);
  copts.model_fingerprint = ModelFingerprint(copts.tables);
  copts.request_timeout_ms = config.cluster().request_timeout_ms();
  TETHER_ASSIGN_OR_RETURN(std::unique_ptr<WorkerClient> client, WorkerClient::Connect(copts));
  LOG(INFO) << who << "connected to " << options.servers.size() << " server(s), staleness "
            << StalenessName(copts.staleness);

  ModelBuffers buffers(shape.hidden, shape.num_labels);
  XmcGrads grads;
  std::vector<uint64_t> keys;
  CsrMatrix x_local;
  std::vector<int64_t> order(train.features.rows);
  const int64_t bs = config.train().minibatch_size();
  const int per_clock = config.train().minibatches_per_clock();
  const int log_every = std::max(1, config.train().log_every_clocks());
  int64_t minibatches = 0;
  const auto train_start = SteadyClock::now();
  double pull_wait = 0;
  for (int epoch = 0; epoch < config.train().epochs(); ++epoch) {
    // A fixed permutation per (seed, rank, epoch): runs are reproducible.
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(config.train().seed() * 1000003ull + rank * 7919ull + epoch);
    std::shuffle(order.begin(), order.end(), rng);
    const CsrMatrix x = GatherRows(train.features, order);
    const CsrMatrix y = GatherRows(train.labels, order);
    double loss_sum = 0;
    int64_t loss_batches = 0;
    for (int64_t b = 0; b < x.rows; b += bs) {
      const int64_t e = std::min(x.rows, b + bs);
      LocalizeBatch(x, b, e, &keys, &x_local);
      const auto pull_start = SteadyClock::now();
      TETHER_RETURN_IF_ERROR(buffers.Pull(client.get(), keys));
      pull_wait += SecondsSince(pull_start);
      const CsrMatrix y_batch = SliceRows(y, b, e);
      TETHER_ASSIGN_OR_RETURN(float loss, model.ComputeGradients(x_local, y_batch,
                                                                 buffers.Params(static_cast<int64_t>(keys.size())), &grads));
      loss_sum += loss;
      ++loss_batches;
      buffers.Push(client.get(), keys, grads);
      report.samples += static_cast<uint64_t>(e - b);
      if (++minibatches % per_clock == 0) {
        TETHER_RETURN_IF_ERROR(client->Clock());
        if (client->clock() % log_every == 0)
          VLOG(1) << who << "clock " << client->clock() << " loss " << loss;
      }
    }
    report.final_loss = loss_sum / std::max<int64_t>(1, loss_batches);
    const double t = SecondsSince(train_start);
    LOG(INFO) << who << "epoch " << epoch + 1 << "/" << config.train().epochs() << " clock " << client->clock()
              << " loss " << report.final_loss << ", " << static_cast<int64_t>(report.samples / t)
              << " samples/s, " << static_cast<int>(100 * pull_wait / t) << "% waiting on pulls, " << t << " s";
  }
  if (minibatches % per_clock != 0) TETHER_RETURN_IF_ERROR(client->Clock());
  TETHER_ASSIGN_OR_RETURN(report.total_samples, client->Barrier(report.samples));
  report.train_seconds = SecondsSince(train_start);
  report.samples_per_second = report.total_samples / std::max(1e-9, report.train_seconds);
  report.pull_wait_fraction = pull_wait / std::max(1e-9, report.train_seconds);
  LOG(INFO) << who << "training done: " << report.total_samples << " samples over all workers in "
            << report.train_seconds << " s (" << static_cast<int64_t>(report.samples_per_second) << " samples/s)";

  if (rank == 0) {
    TETHER_RETURN_IF_ERROR(Evaluate(config, test, client.get(), &model, &buffers, &report));
    LOG(INFO) << who << "test (" << report.test_rows << " rows): P@1 " << report.precision_at[1] << " P@3 "
              << report.precision_at[3] << " P@5 " << report.precision_at[5] << " nDCG@3 " << report.ndcg_at[3]
              << " nDCG@5 " << report.ndcg_at[5];
  }
  const ClientStats& cs = client->stats();
  LOG(INFO) << who << cs.pulls << " pulls (" << cs.rows_pulled << " rows), " << cs.pushes << " pushes ("
            << cs.rows_pushed << " rows), " << cs.bytes_sent / 1e6 << " MB sent, " << cs.bytes_received / 1e6
            << " MB received";
  TETHER_RETURN_IF_ERROR(client->Bye());
  if (rank == 0 && !options.metrics_out.empty())
    TETHER_RETURN_IF_ERROR(WriteMetricsJson(report, config, options.metrics_out));
  return report;
}

Status WriteMetricsJson(const TrainReport& r, const JobConfig& config, const std::string& path) {
  nlohmann::json j;
  j["precision_at_1"] = r.precision_at[1];
  j["precision_at_3"] = r.precision_at[3];
  j["precision_at_5"] = r.precision_at[5];
  j["ndcg_at_1"] = r.ndcg_at[1];
  j["ndcg_at_3"] = r.ndcg_at[3];
  j["ndcg_at_5"] = r.ndcg_at[5];
  j["train_seconds"] = r.train_seconds;
  j["samples_per_second"] = r.samples_per_second;
  j["total_samples"] = r.total_samples;
  j["test_rows"] = r.test_rows;
  j["final_loss"] = r.final_loss;
  j["pull_wait_fraction_rank0"] = r.pull_wait_fraction;
  j["num_workers"] = config.cluster().num_workers();
  j["num_servers"] = config.cluster().num_servers();
  j["staleness"] = config.consistency().staleness();
  j["epochs"] = config.train().epochs();
  j["seed"] = config.train().seed();
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
    if (!out.flush()) return Status::IOError(tmp + ": cannot write metrics");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Status::IOError(path + ": cannot rename metrics into place");
  return Status::OK();
}

}  // namespace tether
