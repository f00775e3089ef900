// One run of a job on this machine (tether-launch): starts
// cluster.num_servers tether-server shards on 127.0.0.1 port 0 (or ipc://
// sockets in the launcher's folder), reads their bound endpoints back from
// port files, starts cluster.num_workers tether-worker ranks pointed at
// them, follows every child to its end, applies --elastic_schedule, and
// prints the metrics of the evaluating worker and the wall time on success.
// With --transport=inproc one tether-worker --in_process child runs the
// whole job (local/local_job.h). Restarts from checkpoints are a loop
// around Launcher (launch/restarts.h).
//
// Every wait is bounded: port files within kPortFileWait, the servers'
// exit kServerExitWait after the last worker, and the whole job
// LaunchOptions::timeout. Teardown stops the workers first (SIGTERM: each
// says BYE), then the servers, then SIGKILLs the process group. With
// cluster.replicas, a server process that dies is logged and the job goes
// on while every shard has a live holder (launch/server_deaths.h); each
// shard whose chain it leaves short of cluster.replicas gets a replacement
// per replica it lacks, a tether-server --join_as_replica --shard=N child
// that copies the shard from its primary (at most
// LaunchOptions::max_replacements over the job); one refused because the
// chain is full (exit kExitNothingToJoin) was not needed. A replacement is
// supervised like a server: its death is one more server death, judged the
// same way. Workers find the servers in the rendezvous then (a shard that
// failed over before a worker reached it is published there). Once every
// worker finished, a replacement still joining a shard whose primary
// exited is stopped (SIGTERM, then SIGKILL after kServerStopGrace) rather
// than waited for (ServerDeaths' LeftOverReplacements). A server process
// whose shard another process claimed in the rendezvous while it still
// runs (stopped, or cut off: launch/claim_watch.h, read every 500 ms) is
// killed (SIGKILL) and its end judged as a server death.
//
// Ownership: a Launcher owns its children (process_table.h), its folder
// (temp_dir.h, removed when it is destroyed) and its signal handling
// (launch_events.h). Thread-safety: single-threaded: one event loop over a
// signalfd and an inotify watch.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "launch/elastic_schedule.h"

namespace tether {

struct LaunchOptions {
  std::string config_path;
  // How long stopped workers may take to leave before the servers are
  // stopped: longer with checkpoints on, as a stop first takes one.
  std::chrono::seconds worker_stop_grace{0};
  std::string bin_dir;                  // holds tether-server and tether-worker
  int num_servers = 0;
  int num_workers = 0;
  std::string metrics_out;              // "" = none
  bool print_metrics = false;           // print the metrics file's JSON at the end (--print_metrics)
  std::string model_out;                // "" = none; --transport=inproc only
  std::chrono::seconds timeout{1800};
  std::string transport = "tcp";        // tcp | ipc | inproc (--transport)
  std::vector<std::string> forwarded;   // "--flag=value" for every child
  // /metrics (--metrics_port): -1 none; 0 a free port per process; else
  // server i at base + i, worker r at base + num_servers + r.
  int metrics_port = -1;
  std::string metrics_sd_dir;           // "" = no file_sd target files
  std::string metrics_sd_prefix;        // file name prefix there (the job id)
  std::chrono::seconds metrics_linger{0};  // children serve this long after training
  // --elastic_schedule: steps by epoch (launch/elastic_schedule.h); empty:
  // the job keeps its cluster.num_workers workers.
  std::vector<ElasticStep> elastic;
  // train.data_on_demand: a worker killed by a signal does not fail the job
  // (shard 0 deals its chunks again; the job ends when the data is used),
  // as when the processes are started by hand.
  bool data_on_demand = false;
  // cluster.replicas: a server process that dies while workers train and
  // its shards keep a live holder does not fail the job
  // (launch/server_deaths.h).
  int replicas = 0;
  // With replicas: how many replacement processes may be started over the
  // job (--max_replacements; 0: none).
  int max_replacements = 0;
  // With replicas, the servers find each other (a replica connects to its
  // shard's primary) through the rendezvous: cluster.rendezvous when the
  // config names one, else a folder of the launcher's own.
  bool config_rendezvous = false;
  // With replicas, what the launcher reads in the rendezvous to find a
  // server process whose shard another process claimed while it runs (it
  // was stopped, or cut off), which it kills and counts as dead
  // (launch/claim_watch.h): cluster.rendezvous ("" for the launcher's
  // folder), the job id and generation the entries are published under,
  // and whether it can read them (not a CURVE store, which admits only the
  // servers' and workers' keys).
  std::string rendezvous;
  std::string job_id;
  uint64_t generation = 0;
  bool rendezvous_readable = true;
};

/// Runs the job once with `options` (checked by the caller, launch/job_plan.h)
/// and returns the process exit code: 0 success (also after server
/// processes died, or were killed once another process claimed their
/// shard, whose shards their replicas or replacements serve); 1 a
/// child failed, the servers did not exit after the workers, the metrics
/// file is missing, or
/// a start-up error; 3 a worker's loss diverged (train.fail_on_divergence);
/// 124 the timeout expired; 128+N on stop signal N. Never returns with a
/// child still running that it could reap. Logs why it did not succeed;
/// with options.metrics_out, exits 1 and 124 after the processes started
/// also record it there (launch/failure_metrics.h).
int RunLaunch(const LaunchOptions& options);

}  // namespace tether
