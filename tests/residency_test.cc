// Device residency of the three built-in models, checked
// without a GPU: each model trains one minibatch against a real ServerShard
// (127.0.0.1, port 0, in a thread) on a CountingBackend, which behaves like a
// discrete device for memory and counts every host↔device transfer. The
// counts are exact (a minibatch's pulled rows go up once, its inputs and
// labels once each, its gradients come down once, nothing else but the
// loss), and the results are bit-identical to the same job on the CPU
// backend (the same kernels on the same inputs).
#include <gtest/gtest.h>

#include <csignal>
#include <cstring>
#include <list>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "server/server.h"
#include "compute/counting_backend.h"
#include "compute/cpu_backend.h"
#include "worker/client/client.h"
#include "worker/client/job_session.h"
#include "worker/models/model.h"
#include "worker/models/model_registry.h"
#include "worker/trainer.h"
#include "tests/testing/cluster.h"

namespace tether {
namespace {

JobConfig Job(ModelType type, int64_t features, int64_t labels) {
  JobConfig c = testing::SgdJob(/*servers=*/1, /*workers=*/1, features, labels, /*hidden=*/8, /*learning_rate=*/0.5f,
                                /*timeout_ms=*/20000);
  c.mutable_model()->set_type(type);
  c.mutable_consistency()->set_staleness(0);
  return c;
}

// rows × cols CSR with about `per_row` distinct random columns per row and
// random values (binary: values 1).
CsrMatrix RandomCsr(int64_t rows, int64_t cols, int per_row, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> col(0, cols - 1);
  std::uniform_real_distribution<float> val(0.1f, 1.0f);
  CsrMatrix m;
  m.cols = cols;
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<uint32_t> idx;
    for (int i = 0; i < per_row; ++i) idx.push_back(static_cast<uint32_t>(col(rng)));
    std::sort(idx.begin(), idx.end());
    idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
    std::vector<float> v(idx.size());
    for (float& x : v) x = val(rng);
    m.AppendRow(idx.data(), v.data(), idx.size());
  }
  return m;
}

// Labels as the trainer hands them over: binary N × 1 with entry 0 on
// positives; multiclass one-hot.
CsrMatrix OneColumn(int64_t rows, int64_t classes, uint32_t seed, bool binary) {
  std::mt19937 rng(seed);
  CsrMatrix m;
  m.cols = binary ? 1 : classes;
  for (int64_t r = 0; r < rows; ++r) {
    const uint32_t c = static_cast<uint32_t>(rng() % classes);
    const float one = 1.0f;
    if (binary && c == 0) {
      m.AppendRow(nullptr, nullptr, 0);
    } else {
      const uint32_t idx = binary ? 0u : c;
      m.AppendRow(&idx, &one, 1);
    }
  }
  return m;
}

struct Worker {
  std::unique_ptr<testing::InProcessCluster> server;
  std::unique_ptr<WorkerClient> client;
  std::unique_ptr<Model> model;
};

Worker Start(const JobConfig& c, Backend* backend) {
  Worker w;
  w.server = std::make_unique<testing::InProcessCluster>(c);
  w.client = w.server->Connect(0);
  static std::list<std::vector<TableSpec>> keep;  // tables must outlive the model (stable addresses)
  keep.push_back(TablesForJob(c));
  StatusOr<std::unique_ptr<Model>> m = CreateModel(c, keep.back(), backend);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (m.ok()) w.model = std::move(m).value();
  return w;
}

// Bitwise float equality (also for NaN / -0).
bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

struct Expected {
  int64_t uploads, csr_uploads, upload_bytes, downloads, download_bytes;
};

// The transfers counted against those expected, no operand in host memory,
// and `readbacks` values read back.
void ExpectCounts(const TransferCounts& n, const Expected& e, int64_t readbacks) {
  EXPECT_EQ(n.uploads, e.uploads);
  EXPECT_EQ(n.csr_uploads, e.csr_uploads);
  EXPECT_EQ(n.upload_bytes, e.upload_bytes);
  EXPECT_EQ(n.downloads, e.downloads);
  EXPECT_EQ(n.download_bytes, e.download_bytes);
  EXPECT_EQ(n.host_operands, 0) << "an op was given host memory: a per-op copy on a GPU";
  EXPECT_EQ(n.readbacks, readbacks);
}

// Two minibatches (pull, gradients, push, clock), then a prediction, on the
// CPU backend and on the counting one, each against its own server (same
// seeds, so the same initial tables). Checks the counts of each minibatch
// and of the prediction, and that losses and scores match bit for bit.
void CheckModel(const JobConfig& c, const CsrMatrix& x, const CsrMatrix& y, const Expected& first,
                const Expected& second, const Expected& predict) {
  CpuBackend cpu(1);
  CountingBackend counting(1);
  Worker a = Start(c, &cpu), b = Start(c, &counting);
  ASSERT_TRUE(a.client && a.model && b.client && b.model);
  const Minibatch batches[] = {{&x, &y, 0, x.rows / 2}, {&x, &y, x.rows / 2, x.rows}};
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE("minibatch " + std::to_string(i));
    const Minibatch& mb = batches[i];
    counting.Reset();
    ASSERT_TRUE(a.model->Pull(mb, a.client.get()).ok());
    const Status pulled = b.model->Pull(mb, b.client.get());
    ASSERT_TRUE(pulled.ok()) << pulled.ToString();
    StatusOr<float> la = a.model->ComputeGradients(mb);
    StatusOr<float> lb = b.model->ComputeGradients(mb);
    ASSERT_TRUE(la.ok() && lb.ok()) << la.status().ToString() << " " << lb.status().ToString();
    EXPECT_TRUE(SameBits(*la, *lb)) << *la << " vs " << *lb;
    a.model->Push(a.client.get());
    b.model->Push(b.client.get());
    ASSERT_TRUE(a.client->Clock().ok());
    ASSERT_TRUE(b.client->Clock().ok());
    const Expected& e = i == 0 ? first : second;
    ExpectCounts(counting.counts(), e, /*readbacks=*/1);  // the loss
  }
  // After two pushes the parameters have moved: equal scores mean equal
  // gradients were applied.
  counting.Reset();
  const Minibatch all{&x, &y, 0, x.rows};
  ASSERT_TRUE(a.model->Pull(all, a.client.get()).ok());
  ASSERT_TRUE(b.model->Pull(all, b.client.get()).ok());
  std::vector<float> sa, sb;
  ASSERT_TRUE(a.model->Predict(all, &sa).ok());
  const Status predicted = b.model->Predict(all, &sb);
  ASSERT_TRUE(predicted.ok()) << predicted.ToString();
  ASSERT_EQ(sa.size(), sb.size());
  ASSERT_EQ(sa.size(), static_cast<size_t>(x.rows * a.model->num_outputs()));
  for (size_t i = 0; i < sa.size(); ++i) ASSERT_TRUE(SameBits(sa[i], sb[i])) << i << ": " << sa[i] << " vs " << sb[i];
  ExpectCounts(counting.counts(), predict, /*readbacks=*/0);
  ASSERT_TRUE(JobSession(a.client.get()).Bye().ok());
  ASSERT_TRUE(JobSession(b.client.get()).Bye().ok());
}

// Distinct feature ids in rows [begin, end) and their non-zeros.
void Count(const CsrMatrix& m, int64_t begin, int64_t end, int64_t* unique, int64_t* nnz) {
  std::vector<bool> seen(m.cols, false);
  *unique = 0;
  *nnz = m.row_ptr[end] - m.row_ptr[begin];
  for (int64_t p = m.row_ptr[begin]; p < m.row_ptr[end]; ++p) {
    if (!seen[m.col_idx[p]]) ++*unique;
    seen[m.col_idx[p]] = true;
  }
}

// The counting backend's CSR upload: row_ptr int64 (rows + 1), col_idx
// uint32, values float unless labels.
int64_t CsrBytes(int64_t rows, int64_t nnz, bool values) { return 8 * (rows + 1) + 4 * nnz + (values ? 4 * nnz : 0); }

TEST(ResidencyTest, XmcMlpMinibatchMovesEachTensorOnceAndMatchesCpu) {
  const int64_t f = 60, l = 7, h = 8, rows = 10;
  const JobConfig c = Job(XMC_MLP, f, l);
  const CsrMatrix x = RandomCsr(rows, f, 6, 1), y = RandomCsr(rows, l, 2, 2);
  Expected e[3];
  const int64_t ranges[3][2] = {{0, rows / 2}, {rows / 2, rows}, {0, rows}};
  for (int i = 0; i < 3; ++i) {
    int64_t u, nnz, lu, lnnz;
    Count(x, ranges[i][0], ranges[i][1], &u, &nnz);
    Count(y, ranges[i][0], ranges[i][1], &lu, &lnnz);
    const int64_t b = ranges[i][1] - ranges[i][0];
    // One packed parameter upload [w1 | b1 | w2 rows | b2] and its gradient
    // download; x (with Aᵀ) and y once each.
    const int64_t packed = 4 * (u * h + h + l * (h + 1) + l);
    if (i < 2) {
      e[i] = {3, 2, packed + CsrBytes(b, nnz, true) + CsrBytes(b, lnnz, false), 1, packed};
    } else {  // predict: parameters and x up, scores down
      e[i] = {2, 1, packed + CsrBytes(b, nnz, true), 1, 4 * b * l};
    }
  }
  CheckModel(c, x, y, e[0], e[1], e[2]);
  // Dropout's masks are drawn on the backend and label smoothing is the
  // loss op's; the input dropout's mask changes the values x goes up with
  // (on the host, before the upload): the same transfers, and the CPU and
  // counting backends agree bit for bit.
  JobConfig regularized = c;
  regularized.mutable_model()->set_dropout(0.3f);
  regularized.mutable_model()->set_label_smoothing(0.1f);
  regularized.mutable_model()->set_input_dropout(0.2f);
  CheckModel(regularized, x, y, e[0], e[1], e[2]);
}

TEST(ResidencyTest, SparseLrMinibatchMovesEachTensorOnceAndMatchesCpu) {
  const int64_t f = 80, rows = 12;
  const JobConfig c = Job(SPARSE_LR, f, 2);
  const CsrMatrix x = RandomCsr(rows, f, 5, 3), y = OneColumn(rows, 2, 4, /*binary=*/true);
  Expected e[3];
  const int64_t ranges[3][2] = {{0, rows / 2}, {rows / 2, rows}, {0, rows}};
  for (int i = 0; i < 3; ++i) {
    int64_t u, nnz;
    Count(x, ranges[i][0], ranges[i][1], &u, &nnz);
    const int64_t b = ranges[i][1] - ranges[i][0];
    const int64_t lnnz = y.row_ptr[ranges[i][1]] - y.row_ptr[ranges[i][0]];
    const int64_t packed = 4 * (u + 1);  // [w | b]
    if (i < 2) {
      e[i] = {3, 2, packed + CsrBytes(b, nnz, true) + CsrBytes(b, lnnz, false), 1, packed};
    } else {
      e[i] = {2, 1, packed + CsrBytes(b, nnz, true), 1, 4 * b};
    }
  }
  CheckModel(c, x, y, e[0], e[1], e[2]);
}

TEST(ResidencyTest, DenseMlpMinibatchMovesEachTensorOnceAndMatchesCpu) {
  const int64_t f = 10, classes = 3, h = 8, rows = 8;
  const JobConfig c = Job(DENSE_MLP, f, classes);
  const CsrMatrix x = RandomCsr(rows, f, 7, 5), y = OneColumn(rows, classes, 6, /*binary=*/false);
  const int64_t packed = 4 * (f * h + h + h * classes + classes);  // [w1 | b1 | w2 | b2]
  const int64_t half = rows / 2;
  // Parameters and the dense input up, labels up, gradients down.
  const Expected mb = {3, 1, packed + 4 * half * f + CsrBytes(half, half, false), 1, packed};
  const Expected predict = {2, 0, packed + 4 * rows * f, 1, 4 * rows * classes};
  CheckModel(c, x, y, mb, mb, predict);
  JobConfig regularized = c;
  regularized.mutable_model()->set_dropout(0.3f);
  regularized.mutable_model()->set_label_smoothing(0.1f);
  CheckModel(regularized, x, y, mb, mb, predict);
}

TEST(ResidencyTest, CountingBackendBuffersAreNotHostMemory) {
  CountingBackend counting(1);
  EXPECT_FALSE(counting.buffers_host_visible());
  MirroredArray<float> a(&counting);
  ASSERT_TRUE(a.Resize(4).ok());
  EXPECT_NE(a.host(), a.device());  // two sides, as on a GPU
  for (int i = 0; i < 4; ++i) a.host()[i] = static_cast<float>(i);
  ASSERT_TRUE(a.Upload().ok());
  // Touching the device side directly from the host would fault (its pages
  // are protected between calls): this is what catches a model that skips
  // Upload / Download. Run in a death test so the fault is observed.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT({ volatile float v = a.device()[0]; (void)v; }, ::testing::KilledBySignal(SIGSEGV), "");
  std::fill(a.host(), a.host() + 4, -1.0f);
  ASSERT_TRUE(a.Download().ok());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(a.host()[i], static_cast<float>(i));
  EXPECT_EQ(counting.counts().uploads, 1);
  EXPECT_EQ(counting.counts().downloads, 1);
  EXPECT_EQ(counting.counts().upload_bytes, 16);
  // On the CPU backend the two sides are one memory and nothing is copied.
  CpuBackend cpu(1);
  MirroredArray<float> m(&cpu);
  ASSERT_TRUE(m.Resize(4).ok());
  EXPECT_EQ(m.host(), m.device());
}

}  // namespace
}  // namespace tether
