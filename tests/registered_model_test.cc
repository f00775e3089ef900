// A model that exists only in this test, registered from here
// (TETHER_REGISTER_MODEL), trains against the unchanged tether-server
// binary: adding a model touches the registry entry and the model's own
// class, nothing on the server side (docs/ARCHITECTURE.md, "Adding a
// model"). The server is started from a config with only cluster and
// consistency sections, as a real process, and is reaped with a bound.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/config.h"
#include "tests/testing/temp_dir.h"
#include "worker/models/model_registry.h"
#include "worker/trainer.h"

extern char** environ;

namespace tether {
namespace {

// Logistic regression with one dense table "wb" = [w (F floats), b]: the
// whole table is pulled each minibatch (F + 1 floats), the gradient of the
// mean log-loss is pushed back. Small enough to write here; different
// enough from SPARSE_LR (row table "w", dense "b") that the server cannot
// have known it.
class DenseLogisticModel final : public Model {
 public:
  DenseLogisticModel(int64_t features, uint32_t table) : f_(features), table_(table), wb_(features + 1), g_(features + 1) {}

  std::string name() const override { return "test_dense_logistic"; }
  LabelKind label_kind() const override { return LabelKind::kBinary; }
  int64_t num_outputs() const override { return 1; }

  Status Pull(const Minibatch&, WorkerClient* client) override { return client->PullDense(table_, wb_.data()).Wait(); }

  StatusOr<float> ComputeGradients(const Minibatch& batch) override {
    std::fill(g_.begin(), g_.end(), 0.0f);
    double loss = 0;
    const CsrMatrix& x = *batch.features;
    const CsrMatrix& y = *batch.labels;
    for (int64_t r = batch.begin; r < batch.end; ++r) {
      const double z = Score(x, r);
      const double label = y.row_ptr[r + 1] > y.row_ptr[r] ? 1.0 : 0.0;
      const double p = 1.0 / (1.0 + std::exp(-z));
      loss += label > 0 ? -std::log(std::max(p, 1e-12)) : -std::log(std::max(1 - p, 1e-12));
      const double d = (p - label) / static_cast<double>(batch.rows());
      for (int64_t k = x.row_ptr[r]; k < x.row_ptr[r + 1]; ++k) g_[x.col_idx[k]] += static_cast<float>(d * x.values[k]);
      g_[f_] += static_cast<float>(d);
    }
    return static_cast<float>(loss / static_cast<double>(batch.rows()));
  }

  void Push(WorkerClient* client) override { (void)client->PushDense(table_, g_.data()); }

  Status Predict(const Minibatch& batch, std::vector<float>* scores) override {
    scores->resize(batch.rows());
    for (int64_t r = batch.begin; r < batch.end; ++r) (*scores)[r - batch.begin] = static_cast<float>(Score(*batch.features, r));
    return Status::OK();
  }

 private:
  double Score(const CsrMatrix& x, int64_t r) const {
    double z = wb_[f_];
    for (int64_t k = x.row_ptr[r]; k < x.row_ptr[r + 1]; ++k) z += double{wb_[x.col_idx[k]]} * x.values[k];
    return z;
  }

  int64_t f_;
  uint32_t table_;
  std::vector<float> wb_, g_;
};

ModelInfo DenseLogisticInfo() {
  ModelInfo m;
  m.name = "test_dense_logistic";
  m.label_kind = LabelKind::kBinary;
  m.validate = [](const JobConfig& c) -> Status {
    if (c.data().format() != LIBSVM) return Status::InvalidArgument("config field data.format: LIBSVM binary data");
    return Status::OK();
  };
  m.tables = [](const JobConfig& c) {
    return std::vector<TableSpec>{MakeTable(c, "wb", TableSpec::DENSE, static_cast<uint64_t>(c.data().num_features()) + 1)};
  };
  m.create = [](const JobConfig& c, const std::vector<TableSpec>& tables, Backend*,
                int) -> StatusOr<std::unique_ptr<Model>> {
    TETHER_ASSIGN_OR_RETURN(uint32_t wb, FindTable(tables, "wb", TableSpec::DENSE,
                                                   static_cast<uint64_t>(c.data().num_features()) + 1));
    return std::unique_ptr<Model>(std::make_unique<DenseLogisticModel>(c.data().num_features(), wb));
  };
  return m;
}

TETHER_REGISTER_MODEL(DenseLogisticInfo());

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(RegisteredModelTest, ATestOnlyModelTrainsAgainstTheUnchangedServerBinary) {
  testing::ScopedTempDir dir;
  const std::string server_config = dir.path() + "/server.pbtxt";
  // Only what a server reads: no data, no model.
  std::ofstream(server_config) << "name: \"registered\"\n"
                                  "cluster { num_servers: 1 num_workers: 1 startup_timeout_ms: 60000 }\n"
                                  "consistency { model: BSP }\n";
  const std::string port_file = dir.path() + "/server.port";
  std::vector<std::string> args = {TETHER_SERVER_BIN, "--config=" + server_config, "--shard=0",
                                   "--listen=tcp://127.0.0.1:0", "--port_file=" + port_file};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t server = -1;
  ASSERT_EQ(posix_spawn(&server, argv[0], nullptr, nullptr, argv.data(), environ), 0) << TETHER_SERVER_BIN;
  // Reaps the server on every path out of the test, within a bound.
  struct Reaper {
    pid_t pid;
    int status = -1;
    bool Wait(std::chrono::seconds bound) {
      const auto until = std::chrono::steady_clock::now() + bound;
      while (std::chrono::steady_clock::now() < until) {
        if (waitpid(pid, &status, WNOHANG) == pid) return true;
        usleep(20000);
      }
      return false;
    }
    ~Reaper() {
      if (status == -1 && !Wait(std::chrono::seconds(0))) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
      }
    }
  } reaper{server};
  std::string endpoint;
  for (int i = 0; i < 1000 && endpoint.empty(); ++i) {  // up to 20 s for the bind
    endpoint = ReadAll(port_file);
    if (endpoint.empty()) usleep(20000);
  }
  while (!endpoint.empty() && endpoint.back() == '\n') endpoint.pop_back();
  ASSERT_FALSE(endpoint.empty()) << "tether-server wrote no port file";

  StatusOr<JobConfig> job = LoadJobConfig("examples/a9a.pbtxt");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  job->set_name("registered");
  job->mutable_model()->set_name("test_dense_logistic");
  job->mutable_cluster()->set_num_servers(1);
  job->mutable_cluster()->set_num_workers(1);
  job->mutable_consistency()->set_model(BSP);
  job->mutable_optimizer()->set_type(SGD);
  job->mutable_optimizer()->set_learning_rate(0.5f);
  job->mutable_train()->set_epochs(1);
  ASSERT_TRUE(ValidateJobConfig(*job).ok()) << ValidateJobConfig(*job).ToString();
  ASSERT_TRUE(ValidateModelConfig(*job).ok()) << ValidateModelConfig(*job).ToString();
  TrainerOptions options;
  options.servers = {endpoint};
  StatusOr<TrainReport> report = RunWorker(*job, options);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(report->model, "test_dense_logistic");
  EXPECT_EQ(report->test_rows, 16281);
  EXPECT_GE(report->Metric("accuracy"), 0.80);  // a9a's majority class is 0.76
  EXPECT_EQ(report->total_samples, 32561u);
  ASSERT_EQ(report->servers.size(), 1u);
  // One dense push per minibatch: ⌈32,561 / 64⌉ = 509 updates applied.
  EXPECT_EQ(report->servers[0].updates_applied(), 509u);
  ASSERT_TRUE(reaper.Wait(std::chrono::seconds(30))) << "tether-server did not exit after the worker left";
  ASSERT_TRUE(WIFEXITED(reaper.status));
  EXPECT_EQ(WEXITSTATUS(reaper.status), 0);
}

}  // namespace
}  // namespace tether
