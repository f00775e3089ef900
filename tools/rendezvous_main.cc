// tether-rendezvous: the rendezvous store (core/net/rendezvous.h) as a
// standalone process, for jobs whose servers and workers are given
// --rendezvous=tcp://HOST:PORT (docs/DEPLOY.md). Holds entries in memory
// until stopped; serves any number of jobs (entries are keyed by job id and
// generation).
//
// Exit codes: 0 stopped by SIGINT/SIGTERM; 1 the bind failed; 2 bad flags.
#include <signal.h>
#include <unistd.h>

#include <gflags/gflags.h>
#include <glog/logging.h>

#include <cstring>
#include <sstream>

#include "core/file_util.h"
#include "core/net/curve.h"
#include "core/net/rendezvous.h"
#include "cli/flag_parser.h"
#include "cli/signals.h"

DEFINE_string(listen, "", "tcp://HOST:PORT to serve on (IPv6: tcp://[ADDR]:PORT; port 0 picks a free port)");
DEFINE_string(port_file, "", "if set, the endpoint served is written here (atomically) once listening");
DEFINE_string(server_secret_key_file, "",
              "CURVE: the servers' key pair (security.curve.server_secret_key_file, mode 0600); with "
              "--authorized_keys, only the servers and the listed workers may read or publish entries");
DEFINE_string(authorized_keys, "",
              "CURVE: comma-separated worker .pub files or directories of them (security.curve.authorized_keys)");

int main(int argc, char** argv) {
  tether::ParseFlagsOrDie(&argc, &argv,
                          {"tether-rendezvous --listen=tcp://HOST:PORT [--port_file=F] [--server_secret_key_file=K --authorized_keys=DIR]\n"
                           "Serves the rendezvous store: servers publish their endpoints, workers look them up."});
  if (FLAGS_listen.empty()) {
    LOG(ERROR) << "[rendezvous] --listen=tcp://HOST:PORT is required";
    return 2;
  }
  // Stop signals are taken synchronously (sigwait), blocked before the
  // store's thread starts so that only this thread receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  for (int sig : tether::StopSignals()) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) == 0 && old.sa_handler != SIG_IGN) sigaddset(&stop_signals, sig);  // nohup
  }
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  tether::SocketOptions options;
  std::vector<std::string> admitted;
  if (!FLAGS_server_secret_key_file.empty() || !FLAGS_authorized_keys.empty()) {
    tether::CurveConfig curve;
    curve.set_server_secret_key_file(FLAGS_server_secret_key_file);
    std::stringstream list(FLAGS_authorized_keys);
    for (std::string entry; std::getline(list, entry, ',');)
      if (!entry.empty()) curve.add_authorized_keys(entry);
    auto served = tether::RendezvousCurveServer(curve, &admitted);
    if (!served.ok()) {
      LOG(ERROR) << "[rendezvous] " << served.status().message();
      return 2;
    }
    options.curve = *served;
  }
  tether::RendezvousStore store;
  if (tether::Status st = store.Start(FLAGS_listen, options, admitted); !st.ok()) {
    LOG(ERROR) << "[rendezvous] " << st.message();
    return st.code() == tether::Status::Code::kInvalidArgument ? 2 : 1;
  }
  LOG(INFO) << "[rendezvous] serving at " << store.endpoint();
  if (!FLAGS_port_file.empty()) {
    if (tether::Status st = tether::WriteFileAtomically(FLAGS_port_file, store.endpoint() + "\n"); !st.ok()) {
      LOG(ERROR) << "[rendezvous] " << st.message();
      return 1;
    }
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  LOG(INFO) << "[rendezvous] stopped by " << strsignal(sig) << " after " << store.requests() << " request(s)";
  store.Stop();
  return 0;
}
