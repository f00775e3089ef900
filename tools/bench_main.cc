// tether-bench: benchmarks that print Markdown tables, each figure set
// against a baseline measured in the same run on the same machine (absolute
// times on shared machines drift; same-run ratios do not).
//
//   tether-bench transport   Tether push/pull over loopback vs a minimal
//                            ZeroMQ DEALER/ROUTER pair moving the same bytes;
//                            with --curve, CURVE on vs off side by side
//   tether-bench updates     server-side SGD/AdaGrad/Adam on pushed rows
//                            (one core) vs a STREAM copy/triad probe
//   tether-bench kv          the worker side of scripts/bench_pslite.sh:
//                            push/pull request shapes against a separately
//                            started tether-server, timed as ps-lite's side is;
//                            with --replicas=0,1, the same shapes against
//                            in-process shards without and with a replica
//   tether-bench rendezvous  N processes (S servers publish, the rest look
//                            every one up) against the directory and the
//                            store backends, vs the same processes with no
//                            rendezvous
//   tether-bench order       the worker's per-epoch row order (one epoch per
//                            line), for baselines that must see the same
//                            minibatches (scripts/bench_train.sh)
//
// Every flag is listed by `tether-bench --help`; docs/PERFORMANCE.md gives
// the commands behind its tables. The benchmarks themselves are bench/, one
// file each; this file maps the flags into their options.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstdio>
#include <string>

#include "bench/bench_cluster.h"
#include "bench/checkpoint_bench.h"
#include "bench/kv_bench.h"
#include "bench/replicated_kv_bench.h"
#include "bench/order_bench.h"
#include "bench/rendezvous_bench.h"
#include "bench/transport_bench.h"
#include "bench/updates_bench.h"
#include "cli/flag_parser.h"

DEFINE_string(keys, "100,1000,10000,100000,1000000", "transport: key counts per request");
DEFINE_string(dims, "", "row widths in floats (default: transport 1,16,64,256; updates 64,256)");
DEFINE_string(servers, "1,2", "transport, and kv --replicas (default there: 2): server shard counts");
DEFINE_string(replicas, "",
              "kv: replica variants, e.g. 0,1: instead of --server, in-process shards over loopback without (0) "
              "and with (1) a replica per shard, measured alternately, one table row per shape and variant");
DEFINE_string(ops, "pull,push", "transport: operations to measure");
DEFINE_double(min_time_s, 0.3, "measure each cell for at least this long (seconds)");
DEFINE_int32(min_reps, 5, "at least this many timed operations per cell");
DEFINE_int32(max_reps, 300, "at most this many timed operations per cell");
DEFINE_double(max_bytes, 1.1e9, "transport: skip cells whose values exceed this many bytes per request");
DEFINE_int64(chunk_bytes, 16 << 20,
             "transport: largest message, both sides: Tether's ClientOptions::max_message_bytes, and the raw "
             "side splits the same way (0 = one message per shard); above glibc's 32 MiB mmap threshold every "
             "buffer is a fresh mapping and page faults dominate");
DEFINE_int32(max_outstanding, 0, "transport: Tether client's requests in flight per shard (0 = the client's default)");
DEFINE_int64(rows, 500000,
             "updates: rows in the table, at least; raised per cell until the rows' weights and state are "
             "--llc_multiple × the last-level cache");
DEFINE_double(llc_multiple, 4, "updates: the working set (rows × (weights + state) bytes) as a multiple of the LLC");
DEFINE_int64(llc_bytes, 0,
             "updates: last-level cache in bytes (0 = read from sysfs, else sysconf(_SC_LEVEL3_CACHE_SIZE), "
             "else the 64 MiB fallback)");
DEFINE_int32(batch, 1000, "updates: rows per push (random, sorted, unique)");
DEFINE_string(optimizers, "sgd,adagrad,adam", "updates: server optimizers to measure");
DEFINE_int64(stream_floats, 1 << 25,
             "updates: floats per array of the bandwidth probe (3 arrays), at least; raised until each array is "
             "--llc_multiple × the last-level cache, as STREAM requires");
DEFINE_string(server, "", "kv: endpoint of a running tether-server (tcp://127.0.0.1:PORT)");
DEFINE_string(job_id, "tether-bench-kv", "kv: the server's job id (its config's name or cluster.job_id)");
DEFINE_string(shapes, "1x1,100000x1,1000000x1,1024x4096,100000x64,100000x256",
              "kv and transport --curve: request shapes, KEYSxDIM (floats per key), comma-separated");
DEFINE_string(optimizer, "sgd", "kv: the tables' server-side update, sgd or noop (checks and lookups, no arithmetic)");
DEFINE_string(wire, "fp32",
              "kv: the tables' values on the wire, both directions: fp32, bf16 or fp16 (16-bit pushes with error "
              "feedback, as a job's --wire)");
DEFINE_bool(error_feedback, true, "kv: with a 16-bit --wire, each row's rounding residual is added to its next push");
DEFINE_bool(curve, false,
            "transport: Tether with CURVE on (security.curve: authenticated, encrypted) side by side with CURVE off, "
            "over the --shapes request shapes, instead of Tether vs raw ZeroMQ");
DEFINE_string(client_key_file, "", "kv: this client's CURVE key pair (NAME.key); with --server_public_key_file: CURVE on");
DEFINE_string(server_public_key_file, "", "kv: the server's CURVE public key (NAME.pub)");
DEFINE_double(push_value, 0.5, "kv: the value of every pushed float (a recognisable pattern for wire captures)");
DEFINE_bool(key_list_cache, true,
            "kv: name repeated key lists instead of sending their keys, where the server keeps lists "
            "(tether-server --key_list_cache_bytes; core/net/key_list_cache.h); false: every request carries its keys");
DEFINE_bool(push_copy, false,
            "kv: push from a plain buffer that the client copies into each push (PushRows(const float*)); "
            "default false pushes a PushValues buffer by reference, as ps-lite's ZPush sends its SArray");
DEFINE_uint64(key_seed, 1, "kv: seed of the random sorted uint64 keys (bench/pslite_kv/kv_bench.cc draws the same)");
DEFINE_uint64(seed, 1, "order: train.seed");
DEFINE_string(ckpt_dir, "", "checkpoint: where to write (default: $TMPDIR/tether-bench-checkpoint.PID); removed after");
DEFINE_int64(ckpt_features, 135909, "checkpoint: input features (rows of w1); default Amazon-670K's");
DEFINE_int64(ckpt_labels, 670091, "checkpoint: labels (rows of w2, size of b2); default Amazon-670K's");
DEFINE_int32(ckpt_hidden, 256, "checkpoint: hidden width (dim of w1 and w2 rows)");
DEFINE_int32(ckpt_servers, 2, "checkpoint: shards writing (threads, as servers on one host)");
DEFINE_int32(ckpt_load_servers, 3, "checkpoint: shards loading it back (another count re-shards)");
DEFINE_int32(rank, 0, "order: worker rank");
DEFINE_int32(epochs, 1, "order: epochs to print");
DEFINE_int64(order_rows, 0, "order: rows in the worker's partition");

DEFINE_string(rdzv_procs, "2,16,64", "rendezvous: process counts N to measure (S = max(1, N/8) servers)");
DEFINE_int32(rdzv_reps, 5, "rendezvous: repetitions per (backend, N); the median is reported");
DEFINE_string(rdzv_dir, "", "rendezvous: parent of the file backend's directory (default $TMPDIR or /tmp)");

namespace {

tether::BenchTiming Timing() {
  tether::BenchTiming t;
  t.min_time_s = FLAGS_min_time_s;
  t.min_reps = FLAGS_min_reps;
  t.max_reps = FLAGS_max_reps;
  return t;
}

int Transport() {
  tether::TransportBenchOptions o;
  o.keys = FLAGS_keys;
  o.dims = FLAGS_dims;
  o.servers = FLAGS_servers;
  o.ops = FLAGS_ops;
  o.shapes = FLAGS_shapes;
  o.max_bytes = FLAGS_max_bytes;
  o.curve = FLAGS_curve;
  o.timing = Timing();
  o.client.chunk_bytes = FLAGS_chunk_bytes;
  o.client.max_outstanding = FLAGS_max_outstanding;
  return tether::RunTransportBench(o);
}

int Updates() {
  tether::UpdatesBenchOptions o;
  o.dims = FLAGS_dims;
  o.optimizers = FLAGS_optimizers;
  o.rows = FLAGS_rows;
  o.llc_multiple = FLAGS_llc_multiple;
  o.llc_bytes = FLAGS_llc_bytes;
  o.batch = FLAGS_batch;
  o.stream_floats = FLAGS_stream_floats;
  o.timing = Timing();
  return tether::RunUpdatesBench(o);
}

int ReplicatedKv() {
  tether::ReplicatedKvBenchOptions o;
  o.replicas = FLAGS_replicas;
  o.servers = gflags::GetCommandLineFlagInfoOrDie("servers").is_default ? "2" : FLAGS_servers;
  o.shapes = FLAGS_shapes;
  o.timing = Timing();
  o.client.chunk_bytes = FLAGS_chunk_bytes;
  o.client.max_outstanding = FLAGS_max_outstanding;
  return tether::RunReplicatedKvBench(o);
}

int Kv() {
  if (!FLAGS_replicas.empty()) return ReplicatedKv();
  tether::KvBenchOptions o;
  o.server = FLAGS_server;
  o.job_id = FLAGS_job_id;
  o.shapes = FLAGS_shapes;
  o.optimizer = FLAGS_optimizer;
  o.wire = FLAGS_wire;
  o.error_feedback = FLAGS_error_feedback;
  o.client_key_file = FLAGS_client_key_file;
  o.server_public_key_file = FLAGS_server_public_key_file;
  o.push_value = FLAGS_push_value;
  o.key_list_cache = FLAGS_key_list_cache;
  o.push_copy = FLAGS_push_copy;
  o.key_seed = FLAGS_key_seed;
  o.chunk_bytes = FLAGS_chunk_bytes;
  o.max_outstanding = FLAGS_max_outstanding;
  o.timing = Timing();
  return tether::RunKvBench(o);
}

int Order() {
  tether::OrderBenchOptions o;
  o.seed = FLAGS_seed;
  o.rank = FLAGS_rank;
  o.epochs = FLAGS_epochs;
  o.rows = FLAGS_order_rows;
  return tether::RunOrderBench(o);
}

int Checkpoint() {
  tether::CheckpointBenchOptions o;
  o.dir = FLAGS_ckpt_dir;
  o.features = FLAGS_ckpt_features;
  o.labels = FLAGS_ckpt_labels;
  o.hidden = FLAGS_ckpt_hidden;
  o.servers = FLAGS_ckpt_servers;
  o.load_servers = FLAGS_ckpt_load_servers;
  return tether::RunCheckpointBench(o);
}

int Rendezvous() {
  tether::RendezvousBenchOptions o;
  o.procs = FLAGS_rdzv_procs;
  o.reps = FLAGS_rdzv_reps;
  o.dir = FLAGS_rdzv_dir;
  return tether::RunRendezvousBench(o);
}

}  // namespace

int main(int argc, char** argv) {
  tether::ParseFlagsOrDie(
      &argc, &argv,
      {"tether-bench transport|updates|kv|order|checkpoint|rendezvous [flags]\n"
       "  transport  push/pull over loopback vs raw ZeroMQ (--keys, --dims, --servers, --ops); with --curve:\n"
       "             CURVE on vs off over the --shapes request shapes\n"
       "  kv         push/pull shapes against a running tether-server (--server, --shapes, --optimizer;\n"
       "             scripts/bench_pslite.sh runs it alternately with ps-lite); with --replicas=0,1 (and\n"
       "             --servers, --shapes): in-process shards without and with a replica, side by side\n"
       "  updates    server optimizers on one core vs a memory-bandwidth probe (--rows, --dims, --optimizers)\n"
       "  order      a worker's per-epoch row order (--order_rows, --seed, --rank, --epochs)\n"
       "  checkpoint write and load an XMC-shaped model's checkpoint vs dd (--ckpt_features, --ckpt_labels,\n"
       "             --ckpt_hidden, --ckpt_servers, --ckpt_load_servers, --ckpt_dir)\n"
       "  rendezvous N processes publish and look up endpoints, directory vs store backends\n"
       "             (--rdzv_procs, --rdzv_reps, --rdzv_dir)",
       {"COMMAND"}});
  gflags::CommandLineFlagInfo level;
  if (gflags::GetCommandLineFlagInfo("minloglevel", &level) && level.is_default) {
    FLAGS_minloglevel = 1;  // keep the tables readable; --minloglevel=0 shows INFO
  }
  const std::string cmd = argv[1];
  if (cmd == "transport") return Transport();
  if (cmd == "updates") return Updates();
  if (cmd == "kv") return Kv();
  if (cmd == "order") return Order();
  if (cmd == "rendezvous") return Rendezvous();
  if (cmd == "checkpoint") return Checkpoint();
  std::fprintf(stderr, "tether-bench: unknown command '%s'\n%s\n", cmd.c_str(), gflags::ProgramUsage());
  return 2;
}
