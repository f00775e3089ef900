// The launcher's library apart from a running job: port files, the process
// table (real short-lived children), the launcher's folder, engine-mode
// tasks from the environment and the role's command line, the checks
// before a job starts, the elastic schedule applied to real children, and
// the summary's exit codes. Every child is bounded (sleep 30 at most) and
// reaped before the test ends.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "launch/elastic_run.h"
#include "launch/engine_task.h"
#include "launch/job_plan.h"
#include "launch/job_summary.h"
#include "launch/launch_request.h"
#include "launch/port_file.h"
#include "launch/process_table.h"
#include "launch/restarts.h"
#include "launch/temp_dir.h"
#include "tests/testing/poll.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

namespace fs = std::filesystem;

// Writes `text` to dir/name; returns that path.
std::string WriteIn(const testing::ScopedTempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir.File(name)) << text;
  return dir.File(name);
}

TEST(PortFileTest, ReadsBoundEndpointsAndRefusesOthers) {
  testing::ScopedTempDir dir;
  auto missing = ReadPortFile(dir.path() + "/none.port");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
  auto tcp = ReadPortFile(WriteIn(dir, "a.port", "tcp://127.0.0.1:4242\n"));
  ASSERT_TRUE(tcp.ok());
  EXPECT_EQ(**tcp, "tcp://127.0.0.1:4242");
  auto ipc = ReadPortFile(WriteIn(dir, "b.port", "ipc:///x/server_0.ipc"));
  ASSERT_TRUE(ipc.ok());
  EXPECT_EQ(**ipc, "ipc:///x/server_0.ipc");
  for (const std::string text : {"", "tcp://127.0.0.1:0", "tcp://host:", "tcp://host:12a", "ipc://", "udp://h:1"}) {
    auto bad = ReadPortFile(WriteIn(dir, "c.port", text));
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_EQ(bad.status().code(), Status::Code::kDataLoss);
    EXPECT_NE(bad.status().message().find("got '" + text + "'"), std::string::npos) << bad.status().message();
  }
}

TEST(ProcessTableTest, FormatsDurationsAndEnds) {
  EXPECT_EQ(FormatDuration(std::chrono::seconds(3725) + std::chrono::milliseconds(999)), "1:02:05");
  Child c;
  c.role = "worker";
  c.index = 2;
  c.pid = 77;
  EXPECT_EQ(c.Name(), "worker 2 (pid 77)");
  c.wait_status = 3 << 8;  // exited with code 3
  EXPECT_EQ(c.HowItEnded(), "exited with code 3");
  EXPECT_FALSE(c.Succeeded());
  c.wait_status = SIGKILL;
  EXPECT_EQ(c.HowItEnded(), "was killed by signal 9 (Killed)");
}

// Reaps until no child of the table runs, for at most 10 s.
bool ReapAll(ProcessTable* table) {
  return testing::PollUntil(10000, [&] {
    table->ReapExited();
    return table->Live() == 0;
  });
}

TEST(ProcessTableTest, StartsReapsAndReportsTheKilledFirst) {
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(devnull, 0);
  ProcessTable table("/bin", devnull);
  ASSERT_TRUE(table.Start("server", 0, "true", {}).ok());
  ASSERT_TRUE(table.Start("worker", 0, "sh", {"-c", "kill -9 $$"}).ok());
  EXPECT_EQ(table.group(), table.children()[0].pid);
  ASSERT_TRUE(ReapAll(&table));
  Child* first = table.NextExited();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->role, "worker");  // killed by a signal: the cause, reported first
  EXPECT_TRUE(WIFSIGNALED(first->wait_status));
  Child* second = table.NextExited();
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(second->Succeeded());
  EXPECT_EQ(table.NextExited(), nullptr);
  close(devnull);
}

TEST(ProcessTableTest, AwaitsAKilledChildBehindAFailedOne) {
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(devnull, 0);
  ProcessTable table("/bin", devnull);
  ASSERT_TRUE(table.Start("server", 0, "sh", {"-c", "exit 1"}).ok());
  ASSERT_TRUE(table.Start("server", 1, "sleep", {"30"}).ok());
  (void)testing::PollUntil(10000, [&] {
    table.ReapExited();
    return table.Live() < 2;
  });
  Child* failed = table.NextExited();
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->HowItEnded(), "exited with code 1");
  // Nothing else ends within the window: no cause besides the failed one.
  EXPECT_EQ(table.AwaitSignalled(std::chrono::milliseconds(20)), nullptr);
  kill(table.children()[1].pid, SIGKILL);
  Child* cause = table.AwaitSignalled(std::chrono::seconds(10));
  ASSERT_NE(cause, nullptr);
  EXPECT_EQ(cause->index, 1);
  EXPECT_EQ(cause->HowItEnded(), "was killed by signal 9 (Killed)");
  EXPECT_EQ(table.NextExited(), nullptr);
  close(devnull);
}

// RunState names a stopped child (the launcher's message about servers
// that did not exit says which are stopped), and nothing for a running one.
TEST(ProcessTableTest, RunStateNamesAStoppedChild) {
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(devnull, 0);
  ProcessTable table("/bin", devnull);
  ASSERT_TRUE(table.Start("server", 0, "sleep", {"30"}).ok());
  const Child& c = table.children()[0];
  EXPECT_EQ(c.RunState(), "");
  kill(c.pid, SIGSTOP);
  EXPECT_TRUE(testing::PollUntil(10000, [&] { return c.RunState() == "stopped (SIGSTOP)"; }));
  kill(c.pid, SIGCONT);
  EXPECT_TRUE(testing::PollUntil(10000, [&] { return c.RunState().empty(); }));
  kill(c.pid, SIGKILL);
  EXPECT_TRUE(testing::PollUntil(10000, [&] {
    table.ReapExited();
    return table.Live() == 0;
  }));
  close(devnull);
}

// Live() counts the children of every role (replacements too), Live(role)
// those of one.
TEST(ProcessTableTest, CountsEveryRoleAsLive) {
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(devnull, 0);
  ProcessTable table("/bin", devnull);
  ASSERT_TRUE(table.Start("worker", 0, "true", {}).ok());
  ASSERT_TRUE(table.Start("replacement", 4, "sleep", {"30"}).ok());
  EXPECT_EQ(table.Live(), 2);  // none reaped yet
  (void)testing::PollUntil(10000, [&] {
    table.ReapExited();
    return table.Live("worker") == 0;
  });
  EXPECT_EQ(table.Live("worker"), 0);
  EXPECT_EQ(table.Live("replacement"), 1);
  EXPECT_EQ(table.Live(), 1);
  table.SignalAll(SIGKILL);
  EXPECT_TRUE(ReapAll(&table));
  close(devnull);
}

TEST(TempDirTest, RemovesOnlyDeadLaunchersFolders) {
  testing::ScopedTempDir parent;
  // A pid that has exited (a reaped child) names a dead launcher.
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  waitpid(dead, nullptr, 0);
  const std::string gone = parent.path() + "/tether-launch.1.aaaaaa";
  const std::string alive = parent.path() + "/tether-launch.2.bbbbbb";
  const std::string no_owner = parent.path() + "/tether-launch.3.cccccc";
  for (const auto& d : {gone, alive, no_owner}) fs::create_directory(d);
  std::ofstream(gone + "/owner") << dead << " 12345\n";
  std::ofstream(alive + "/owner") << getpid() << " " << ProcessStartTime(getpid()) << "\n";
  ASSERT_FALSE(ProcessStartTime(getpid()).empty());
  RemoveDeadLaunchersTempDirs(parent.path());
  EXPECT_FALSE(fs::exists(gone));
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_TRUE(fs::exists(no_owner));
}

// Sets environment variables for one test and restores them after.
class ScopedEnv {
 public:
  void Set(const char* name, const char* value) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old == nullptr ? nullptr : new std::string(old));
    if (value == nullptr)
      unsetenv(name);
    else
      setenv(name, value, 1);
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second == nullptr) {
        unsetenv(it->first.c_str());
      } else {
        setenv(it->first.c_str(), it->second->c_str(), 1);
        delete it->second;
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::string*>> saved_;
};

void ClearSchedulerEnv(ScopedEnv* env) {
  for (const char* v : {"SLURM_STEP_ID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_JOB_ID", "SLURM_RESTART_COUNT",
                        "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"})
    env->Set(v, nullptr);
}

TEST(EngineTaskTest, TakesItsPlaceFromTheScheduler) {
  ScopedEnv env;
  ClearSchedulerEnv(&env);
  auto none = DetectEngineTask();
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  env.Set("SLURM_STEP_ID", "4294967294");  // the batch script's step: not a task
  env.Set("SLURM_PROCID", "3");
  env.Set("SLURM_NTASKS", "8");
  ASSERT_FALSE(DetectEngineTask()->has_value());
  env.Set("SLURM_STEP_ID", "0");
  env.Set("SLURM_JOB_ID", "77");
  env.Set("SLURM_RESTART_COUNT", "2");
  auto slurm = DetectEngineTask();
  ASSERT_TRUE(slurm.ok() && slurm->has_value());
  EXPECT_EQ((*slurm)->scheduler, "SLURM");
  EXPECT_EQ((*slurm)->rank, 3);
  EXPECT_EQ((*slurm)->ntasks, 8);
  EXPECT_EQ((*slurm)->job_id, "slurm-77.0");
  EXPECT_EQ((*slurm)->generation, 2u);
  env.Set("SLURM_PROCID", "x");
  auto bad = DetectEngineTask();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "environment variable SLURM_PROCID='x': expected a non-negative integer");
  ClearSchedulerEnv(&env);
  env.Set("OMPI_COMM_WORLD_RANK", "1");
  env.Set("OMPI_COMM_WORLD_SIZE", "2");
  env.Set("PMIX_NAMESPACE", "ns");
  auto ompi = DetectEngineTask();
  ASSERT_TRUE(ompi.ok() && ompi->has_value());
  EXPECT_EQ((*ompi)->scheduler, "Open MPI");
  EXPECT_EQ((*ompi)->job_id, "ompi-ns");
  EXPECT_EQ((*ompi)->chosen_over, "");
  // SLURM's variables leaked into mpirun's tasks (every task sees
  // SLURM_PROCID 0): Open MPI's ranks are used, and both sets are named.
  env.Set("SLURM_STEP_ID", "0");
  env.Set("SLURM_PROCID", "0");
  env.Set("SLURM_NTASKS", "1");
  auto both = DetectEngineTask();
  ASSERT_TRUE(both.ok() && both->has_value());
  EXPECT_EQ((*both)->scheduler, "Open MPI");
  EXPECT_EQ((*both)->rank, 1);
  EXPECT_EQ((*both)->ntasks, 2);
  EXPECT_EQ((*both)->chosen_over,
            "Open MPI's OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 used; SLURM's SLURM_PROCID=0 SLURM_NTASKS=1 "
            "SLURM_STEP_ID=0 ignored (mpirun started this process: the SLURM variables are its allocation's or "
            "leaked into its environment)");
}

JobConfig TwoByTwo() {
  JobConfig c;
  c.set_name("job");
  c.mutable_cluster()->set_num_servers(2);
  c.mutable_cluster()->set_num_workers(2);
  c.mutable_cluster()->set_rendezvous("tcp://10.0.0.1:5555");
  return c;
}

TEST(EngineTaskTest, BuildsTheRolesCommandLine) {
  EngineTask task;
  task.scheduler = "SLURM";
  task.rank = 3;
  task.ntasks = 4;
  task.job_id = "slurm-9.0";
  EngineOptions o;
  o.config_path = "job.pbtxt";
  o.overrides = {"--staleness=2", "--num_workers=2"};
  o.resume_from = "ckpt";
  o.metrics_port = 9100;
  o.metrics_host = "0.0.0.0";
  o.metrics_linger_s = 5;
  auto worker = EngineRoleCommand(task, TwoByTwo(), o, "/opt/bin");
  ASSERT_TRUE(worker.ok()) << worker.status().ToString();
  const std::vector<std::string> want = {
      "/opt/bin/tether-worker", "--config=job.pbtxt",        "--rank=1",         "--num_servers=2",
      "--num_workers=2",        "--job_id=slurm-9.0",        "--generation=0",   "--rendezvous=tcp://10.0.0.1:5555",
      "--staleness=2",          "--resume_from=ckpt",        "--metrics_port=9103", "--metrics_host=0.0.0.0",
      "--metrics_linger_s=5"};
  EXPECT_EQ(*worker, want);
  task.rank = 0;
  o.rendezvous_serve = true;
  o.listen = "tcp://*:0";
  auto server = EngineRoleCommand(task, TwoByTwo(), o, "/opt/bin");
  ASSERT_TRUE(server.ok());
  EXPECT_EQ((*server)[0], "/opt/bin/tether-server");
  EXPECT_EQ((*server)[2], "--shard=0");
  EXPECT_NE(std::find(server->begin(), server->end(), "--rendezvous_serve"), server->end());
  task.ntasks = 2;
  auto no_worker = EngineRoleCommand(task, TwoByTwo(), o, "/opt/bin");
  ASSERT_FALSE(no_worker.ok());
  EXPECT_EQ(no_worker.status().message(),
            "2 task(s) and --num_servers=2 leave no worker: start num_servers + num_workers tasks (srun -n / mpirun "
            "-np)");
  task.ntasks = 5;
  o.num_workers_flag = "2";
  auto contradicts = EngineRoleCommand(task, TwoByTwo(), o, "/opt/bin");
  ASSERT_FALSE(contradicts.ok());
  EXPECT_EQ(contradicts.status().message(), "--num_workers=2 contradicts the 5 tasks less 2 server(s) = 3 worker(s)");
}

TEST(LaunchRequestTest, SecondLaunchIntoAMetricsFolderIsRefusedWhileTheFirstHoldsIt) {
  testing::ScopedTempDir tmp;
  const std::string dir = tmp.path() + "/md";
  JobConfig c = TwoByTwo();
  c.mutable_train()->set_metrics_dir(dir);
  EXPECT_TRUE(CheckOutputPaths(LaunchRequest(), c).ok());
  auto first = LockMetricsDir(c);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_TRUE(first->held());
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string refused = "train.metrics_dir (--metrics_dir)=" + dir + ": in use by a live job (pid " +
                              std::to_string(getpid()) + " on host " + host + ", holding " + dir +
                              "/LOCK): a launch needs the folder to itself; give this job its own --metrics_dir (a "
                              "lock of a process that died is released with it)";
  // Refused at the start-up check and, however close two launches start,
  // at the lock itself.
  EXPECT_EQ(CheckOutputPaths(LaunchRequest(), c).message(), refused);
  auto second = LockMetricsDir(c);
  EXPECT_EQ(second.status().code(), Status::Code::kFailedPrecondition);
  EXPECT_EQ(second.status().message(), refused);
  // Once the first ends, its files keep the folder from a second run.
  std::ofstream(dir + "/worker-0.jsonl") << "{}\n";
  *first = FileLock();
  EXPECT_EQ(LockMetricsDir(c).status().message(),
            "train.metrics_dir (--metrics_dir)=" + dir +
                ": already holds a run (worker-0.jsonl); a second run appended there would draw as one broken line: "
                "give a new folder, or remove this one");
  EXPECT_FALSE(LockMetricsDir(TwoByTwo())->held());  // no folder, nothing held
}

TEST(LaunchRequestTest, SecondLaunchOntoAMetricsFileIsRefusedWhileTheFirstHoldsIt) {
  testing::ScopedTempDir tmp;
  LaunchRequest r;
  r.metrics_out = tmp.path() + "/same.json";
  EXPECT_TRUE(CheckOutputPaths(r, TwoByTwo()).ok());
  auto first = LockMetricsOut(r);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->path(), r.metrics_out + ".lock");
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string refused = "flag --metrics_out=" + r.metrics_out + ": in use by a live job (pid " +
                              std::to_string(getpid()) + " on host " + host + ", holding " + r.metrics_out +
                              ".lock): another launch writes its metrics there; give this job its own --metrics_out "
                              "(a lock of a process that died is released with it)";
  EXPECT_EQ(CheckOutputPaths(r, TwoByTwo()).message(), refused);
  EXPECT_EQ(LockMetricsOut(r).status().message(), refused);
  // Through a link: the lock is the target's.
  std::filesystem::create_symlink("same.json", tmp.path() + "/link.json");
  LaunchRequest by_link;
  by_link.metrics_out = tmp.path() + "/link.json";
  EXPECT_EQ(LockMetricsOut(by_link).status().code(), Status::Code::kFailedPrecondition);
  *first = FileLock();
  EXPECT_TRUE(LockMetricsOut(r).ok());
  // A device written through holds no run's file: nothing to hold.
  LaunchRequest to_null;
  to_null.metrics_out = "/dev/null";
  EXPECT_FALSE(LockMetricsOut(to_null)->held());
}

TEST(LaunchRequestTest, RefusesFlagsBeforeAnythingStarts) {
  EXPECT_TRUE(CheckLaunchCommandLine(0, 3, "ipc", 10).ok());
  EXPECT_EQ(CheckLaunchCommandLine(-1, 0, "tcp", 10).message(),
            "--servers=-1: a job needs at least one server shard; give a count ≥ 1, or leave the flag out to take "
            "the config's");
  EXPECT_EQ(CheckLaunchCommandLine(0, -1, "tcp", 10).message(),
            "--workers=-1: a job needs at least one worker; give a count ≥ 1, or leave the flag out to take the "
            "config's");
  EXPECT_EQ(CheckLaunchCommandLine(0, 0, "udp", 10).message(), "--transport=udp: expected tcp, ipc or inproc");
  EXPECT_EQ(CheckLaunchCommandLine(0, 0, "tcp", 0).message(), "--timeout_s must be positive, got 0");
  EXPECT_TRUE(CheckCountGiven("workers", 0, /*given=*/false).ok());
  EXPECT_TRUE(CheckCountGiven("workers", 2, /*given=*/true).ok());
  EXPECT_EQ(CheckCountGiven("workers", 0, /*given=*/true).message(),
            "--workers=0: a job needs at least one worker; give a count ≥ 1, or leave the flag out to take the "
            "config's");
  EXPECT_EQ(CheckCountGiven("servers", 0, /*given=*/true).message(),
            "--servers=0: a job needs at least one server shard; give a count ≥ 1, or leave the flag out to take "
            "the config's");
  {
    LaunchRequest out;
    out.model_out = "/proc/m.safetensors";
    EXPECT_EQ(CheckOutputPaths(out, TwoByTwo()).message(),
              "flag --model_out=/proc/m.safetensors: /proc is on /proc (procfs), which holds no files of ours: "
              "choose a folder on a disk");
    out.model_out.clear();
    JobConfig c = TwoByTwo();
    c.mutable_checkpoint()->set_dir("/sys/ck");
    EXPECT_NE(CheckOutputPaths(out, c).message().find("is on sysfs"), std::string::npos);
  }
  LaunchRequest r;
  r.resume_if_present = true;
  EXPECT_EQ(ResolveResumeIfPresent(TwoByTwo(), &r).message(),
            "--resume_if_present needs checkpoint.dir (--checkpoint_dir): where to look for one");
  r.engine = "maybe";
  EXPECT_EQ(SelectEngineTask(r).status().message(), "--engine=maybe: expected auto, on or off");
  ScopedEnv env;
  ClearSchedulerEnv(&env);
  r.engine = "on";
  EXPECT_NE(SelectEngineTask(r).status().message().find("--engine=on, but this process is not a task"),
            std::string::npos);
  env.Set("OMPI_COMM_WORLD_RANK", "0");
  env.Set("OMPI_COMM_WORLD_SIZE", "4");
  r.not_for_engine = {"timeout_s"};
  EXPECT_NE(SelectEngineTask(r).status().message().find("--timeout_s does not apply in engine mode"),
            std::string::npos);
  r.engine = "off";
  auto off = SelectEngineTask(r);
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->has_value());
}

TEST(JobPlanTest, ForwardsCountsAndOverridesAndRefusesBadCombinations) {
  LaunchRequest r;
  r.config_path = "job.pbtxt";
  r.overrides = {"--num_workers=2", "--staleness=1"};
  auto options = PlanLaunch(r, TwoByTwo(), "/opt/bin");
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  ASSERT_EQ(options->forwarded.size(), 4u);
  EXPECT_EQ(options->forwarded[0], "--num_servers=2");
  EXPECT_EQ(options->forwarded[1], "--num_workers=2");
  EXPECT_EQ(options->forwarded[2], "--staleness=1");
  EXPECT_EQ(options->forwarded[3].rfind("--job_id=job-" + std::to_string(getpid()) + "-", 0), 0u);
  EXPECT_EQ(options->worker_stop_grace.count(), 0);  // no checkpoint.dir
  r.model_out = "m.npz";
  EXPECT_NE(PlanLaunch(r, TwoByTwo(), "/b").status().message().find("--model_out needs --transport=inproc"),
            std::string::npos);
  r.model_out.clear();
  r.max_restarts = 1;
  EXPECT_EQ(PlanLaunch(r, TwoByTwo(), "/b").status().message(),
            "--max_restarts=1 restarts the job from its checkpoints: set checkpoint.dir (--checkpoint_dir), and an "
            "interval (--checkpoint_every_clocks or --checkpoint_every_seconds) so that a restart resumes from the "
            "latest checkpoint rather than from the start");
  r.max_restarts = 0;
  r.elastic_schedule = "2:+1";
  r.transport = "inproc";
  JobConfig elastic = TwoByTwo();
  elastic.mutable_cluster()->set_max_workers(4);
  EXPECT_EQ(PlanLaunch(r, elastic, "/b").status().message(),
            "--elastic_schedule needs a process per worker: not with --transport=inproc");
}

// --max_replacements: twice the servers unless given; 0 turns replacements
// off; below -1 is refused.
TEST(JobPlanTest, MaxReplacementsDefaultsToTwiceTheServers) {
  LaunchRequest r;
  r.config_path = "job.pbtxt";
  JobConfig job = TwoByTwo();
  job.mutable_cluster()->set_replicas(1);
  auto options = PlanLaunch(r, job, "/opt/bin");
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->max_replacements, 4);
  r.max_replacements = 0;
  options = PlanLaunch(r, job, "/opt/bin");
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->max_replacements, 0);
  r.max_replacements = -2;
  EXPECT_EQ(PlanLaunch(r, job, "/b").status().message(),
            "--max_replacements must be ≥ 0 (or -1: twice the server processes), got -2");
}

// Launcher flags the job would ignore are refused, naming the flag:
// --max_replacements without replicas; --liveness_timeout_ms and the CURVE
// key flags in one process (inproc), where no connection or traffic leaves.
TEST(JobPlanTest, FlagsTheJobWouldIgnoreAreRefused) {
  LaunchRequest r;
  r.config_path = "job.pbtxt";
  r.max_replacements = 3;
  r.max_replacements_set = true;
  EXPECT_EQ(PlanLaunch(r, TwoByTwo(), "/b").status().message(),
            "--max_replacements=3 bounds the replacement servers of shards with replicas, and this job has "
            "cluster.replicas 0: add --replicas=R, or drop --max_replacements");
  JobConfig replicated = TwoByTwo();
  replicated.mutable_cluster()->set_replicas(1);
  EXPECT_TRUE(PlanLaunch(r, replicated, "/b").ok());
  r.max_replacements_set = false;
  r.transport = "inproc";
  r.overrides = {"--epochs=2", "--liveness_timeout_ms=2000"};
  EXPECT_EQ(PlanLaunch(r, TwoByTwo(), "/b").status().message(),
            "flag --liveness_timeout_ms=2000 is not read with --transport=inproc: a one-process job has no "
            "connection to a server to watch (tcp and ipc only); drop it, or use --transport=tcp");
  r.overrides = {"--server_secret_key_file=s.key"};
  EXPECT_NE(PlanLaunch(r, TwoByTwo(), "/b").status().message().find("CURVE has nothing to encrypt"), std::string::npos);
  r.overrides = {"--rendezvous=file:/tmp/r"};
  EXPECT_EQ(PlanLaunch(r, TwoByTwo(), "/b").status().message(),
            "flag --rendezvous=file:/tmp/r is not read with --transport=inproc: a one-process job's shards publish "
            "no endpoints and its workers look none up; drop it, or use --transport=tcp");
  r.overrides = {"--request_timeout_ms=5000", "--worker_timeout_ms=9000"};
  EXPECT_TRUE(PlanLaunch(r, TwoByTwo(), "/b").ok()) << "an in-process job reads these";
  r.transport = "tcp";
  r.overrides = {"--liveness_timeout_ms=2000"};
  EXPECT_TRUE(PlanLaunch(r, TwoByTwo(), "/b").ok());
}

// --check_config runs PlanMetrics' refusals without making the folder.
TEST(JobPlanTest, MetricsFlagsAreCheckedWithoutEffects) {
  LaunchRequest r;
  r.metrics_sd_dir = ::testing::TempDir() + "/sd-never-made";
  EXPECT_EQ(CheckMetricsFlags(r, 4).message(), "--metrics_sd_dir needs --metrics_port (0: a free port per process)");
  r.metrics_port = 65534;
  EXPECT_EQ(CheckMetricsFlags(r, 4).message(), "--metrics_port=65534 gives the last of 4 processes port 65537, past 65535");
  r.metrics_port = 9100;
  EXPECT_TRUE(CheckMetricsFlags(r, 4).ok());
  EXPECT_FALSE(std::filesystem::exists(r.metrics_sd_dir));
}

// cluster.replicas reaches every server the launcher starts as --replicas,
// from the config or an override, once; an in-process job refuses it.
TEST(JobPlanTest, ForwardsReplicasAndRefusesThemInProcess) {
  LaunchRequest r;
  r.config_path = "job.pbtxt";
  JobConfig job = TwoByTwo();
  job.mutable_cluster()->set_replicas(1);
  job.mutable_cluster()->set_job_id("j");
  auto options = PlanLaunch(r, job, "/opt/bin");
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->forwarded, (std::vector<std::string>{"--num_servers=2", "--num_workers=2", "--replicas=1"}));
  EXPECT_EQ(options->replicas, 1);
  EXPECT_TRUE(options->config_rendezvous);
  job.mutable_cluster()->clear_rendezvous();
  options = PlanLaunch(r, job, "/opt/bin");
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_FALSE(options->config_rendezvous);  // the launcher gives its servers a folder of its own
  // tether-launch --replicas=1: the flag set the config's field, which is forwarded once.
  r.overrides = {"--replicas=1", "--staleness=1"};
  options = PlanLaunch(r, job, "/opt/bin");
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->forwarded,
            (std::vector<std::string>{"--num_servers=2", "--num_workers=2", "--replicas=1", "--staleness=1"}));
  r.transport = "inproc";
  EXPECT_EQ(PlanLaunch(r, job, "/b").status().message(),
            "config field cluster.replicas: is 1, but this is an in-process job (tether-launch --transport=inproc, "
            "tether-worker --in_process): every shard of an in-process job runs in one process, so a replica would "
            "end with its primary; run the servers as processes (tether-launch --transport=tcp), or set "
            "cluster.replicas to 0 (--replicas=0)");
  r.transport = "ipc";
  EXPECT_EQ(PlanLaunch(r, job, "/b").status().message(),
            "config field cluster.replicas: is 1, but a replica serves its shard on a tcp:// port of its own: use "
            "--transport=tcp");
  job.mutable_cluster()->set_replicas(0);
  EXPECT_TRUE(PlanLaunch(r, job, "/b").ok());
}

// Where the launcher reads the servers' entries to find a stopped server
// whose shard another process claimed: the config's rendezvous, the job id
// (the config's, or this launch's own) and generation; not a CURVE store.
TEST(JobPlanTest, NamesWhereTheServersPublishTheirShards) {
  LaunchRequest r;
  r.config_path = "job.pbtxt";
  JobConfig job = TwoByTwo();
  job.mutable_cluster()->set_replicas(1);
  job.mutable_cluster()->set_generation(3);
  auto options = PlanLaunch(r, job, "/opt/bin");
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->rendezvous, "tcp://10.0.0.1:5555");
  EXPECT_EQ("--job_id=" + options->job_id, options->forwarded.back());
  EXPECT_EQ(options->job_id.rfind("job-" + std::to_string(getpid()) + "-", 0), 0u);
  EXPECT_EQ(options->generation, 3u);
  EXPECT_TRUE(options->rendezvous_readable);
  job.mutable_cluster()->set_job_id("j");
  job.mutable_security()->mutable_curve();
  options = PlanLaunch(r, job, "/opt/bin");
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->job_id, "j");
  EXPECT_FALSE(options->rendezvous_readable);  // its keys are the servers' and workers'
  job.mutable_cluster()->clear_rendezvous();
  options = PlanLaunch(r, job, "/opt/bin");
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->rendezvous, "");  // the launcher's own folder
  EXPECT_TRUE(options->rendezvous_readable);
}

TEST(JobPlanTest, LaysOutMetricsPorts) {
  LaunchRequest r;
  LaunchOptions o;
  o.num_servers = 2;
  o.num_workers = 2;
  r.metrics_sd_dir = "sd";
  EXPECT_EQ(PlanMetrics(r, TwoByTwo(), &o).message(), "--metrics_sd_dir needs --metrics_port (0: a free port per process)");
  r.metrics_sd_file_set = true;
  EXPECT_EQ(PlanMetrics(r, TwoByTwo(), &o).message(),
            "flag --metrics_sd_file names one process's file; tether-launch takes --metrics_sd_dir (one file_sd "
            "target file per process)");
  r.metrics_sd_file_set = false;
  r.metrics_sd_dir.clear();
  r.metrics_port = 65534;
  EXPECT_EQ(PlanMetrics(r, TwoByTwo(), &o).message(),
            "--metrics_port=65534 gives the last of 4 processes port 65537, past 65535");
  r.metrics_port = 9100;
  r.metrics_host = "127.0.0.1";
  r.metrics_linger_s = 3;
  ASSERT_TRUE(PlanMetrics(r, TwoByTwo(), &o).ok());
  EXPECT_EQ(o.metrics_port, 9100);
  EXPECT_EQ(o.metrics_linger.count(), 3);
  EXPECT_EQ(o.forwarded, (std::vector<std::string>{"--metrics_host=127.0.0.1", "--metrics_linger_s=3"}));
}

TEST(JobSummaryTest, ExitCodesSayWhatHappened) {
  testing::ScopedTempDir dir;
  JobSummary s;
  s.num_servers = 1;
  s.num_workers = 1;
  s.metrics_out = dir.path() + "/none.json";
  EXPECT_EQ(PrintJobSummary(s), 1);  // no metrics file
  s.metrics_out = WriteIn(dir, "bad.json", "{not json");
  EXPECT_EQ(PrintJobSummary(s), 1);
  s.metrics_out = WriteIn(dir, "m.json", "{\"precision_at_1\": 0.5}");
  EXPECT_EQ(PrintJobSummary(s), 0);
  s.diverged = {"worker 1 (pid 5)"};
  EXPECT_EQ(PrintJobSummary(s), 3);
  s.partial_eval = {"worker 0 (pid 4)"};  // the evaluation's verdict first
  EXPECT_EQ(PrintJobSummary(s), 4);
}

TEST(JobSummaryTest, WorkersThatJoinedLaterAreCounted) {
  testing::ScopedTempDir dir;
  JobSummary s;
  s.num_servers = 2;
  s.num_workers = 2;
  s.metrics_out = WriteIn(dir, "m.json", "{\"precision_at_1\": 0.5, \"workers\": [{}, {}, {}, {}]}");
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(PrintJobSummary(s), 0);
  const std::string line = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(line.find("2 server(s), 4 worker(s) (2 at the start); metrics in"), std::string::npos) << line;
  s.metrics_out = WriteIn(dir, "two.json", "{\"workers\": [{}, {}]}");
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(PrintJobSummary(s), 0);
  const std::string plain = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(plain.find("2 server(s), 2 worker(s); metrics in"), std::string::npos) << plain;
}

TEST(RestartsTest, NoCheckpointYetUntilAFolderHasAManifest) {
  testing::ScopedTempDir dir;
  EXPECT_TRUE(NoCheckpointYet(""));
  EXPECT_TRUE(NoCheckpointYet(dir.path() + "/none"));
  EXPECT_TRUE(NoCheckpointYet(dir.path()));
  fs::create_directories(dir.path() + "/ckpt-000000000040");  // begun, never complete
  EXPECT_TRUE(NoCheckpointYet(dir.path()));
  WriteIn(dir, "ckpt-000000000040/MANIFEST", "x");
  EXPECT_FALSE(NoCheckpointYet(dir.path()));
}

TEST(JobSummaryTest, HeadlineNamesTheMetricsPresentAndTheTrainTime) {
  const nlohmann::json xmc = {{"precision_at_1", 0.61351888}, {"precision_at_3", 0.38475811},
                              {"precision_at_5", 0.2845328}, {"ndcg_at_5", 0.61071553},
                              {"train_seconds", 4.2806}, {"psp_at_1", 0.49}, {"workers", nlohmann::json::array()}};
  EXPECT_EQ(HeadlineMetrics(xmc), "P@1 0.6135, P@3 0.3848, P@5 0.2845, nDCG@5 0.6107, train 4.3 s");
  const nlohmann::json binary = {{"accuracy", 0.8475}, {"auc", 0.90125}, {"log_loss", 0.33333}, {"train_seconds", 12}};
  EXPECT_EQ(HeadlineMetrics(binary), "accuracy 0.8475, AUC 0.9012, log loss 0.3333, train 12.0 s");
  // Undefined metrics are null in the file: left out, not printed as 0.
  const nlohmann::json undefined = {{"precision_at_1", nullptr}, {"accuracy", 0.5}};
  EXPECT_EQ(HeadlineMetrics(undefined), "accuracy 0.5000");
  EXPECT_EQ(HeadlineMetrics(nlohmann::json::object()), "");
}

TEST(ElasticRunTest, StartsJoinersAndStopsTheNewestAtTheirEpochs) {
  testing::ScopedTempDir dir;
  const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ProcessTable table("/bin", devnull);
  ElasticRun run({{2, +1}, {3, -1}}, /*num_workers=*/1, dir.path());
  EXPECT_TRUE(run.enabled());
  EXPECT_EQ(run.ProgressFile(4), dir.path() + "/progress_4");
  ASSERT_TRUE(table.Start("worker", 0, "sleep", {"30"}).ok());
  std::vector<int> started;
  const auto start = [&](int rank) {
    started.push_back(rank);
    return table.Start("worker", rank, "sleep", {"30"});
  };
  WriteIn(dir, "progress_0", "1 0\n");
  EXPECT_FALSE(run.Poll(&table, true, start).has_value());
  EXPECT_TRUE(started.empty());
  WriteIn(dir, "progress_0", "2 5\n");
  EXPECT_FALSE(run.Poll(&table, true, start).has_value());
  EXPECT_EQ(started, std::vector<int>{1});
  // Epoch 3, but the joiner is not in the job yet: the stop waits.
  WriteIn(dir, "progress_0", "3 9\n");
  EXPECT_FALSE(run.Poll(&table, true, start).has_value());
  EXPECT_TRUE(run.pending());
  WriteIn(dir, "progress_1", "3 9\n");
  EXPECT_FALSE(run.Poll(&table, true, start).has_value());
  EXPECT_FALSE(run.pending());
  EXPECT_FALSE(table.children()[0].leaving);
  EXPECT_TRUE(table.children()[1].leaving);  // the newest worker leaves
  table.SignalAll(SIGKILL);
  EXPECT_TRUE(ReapAll(&table));
  close(devnull);
}

}  // namespace
}  // namespace tether
