// tether-keygen: writes a CurveZMQ key pair for security.curve
// (core/net/curve.h, docs/OPERATIONS.md "Security").
//
//   tether-keygen --out=keys --name=server   → keys/server.key (mode 0600),
//                                              keys/server.pub
//
// NAME.key holds the secret and the public key and stays on the host that
// uses it; NAME.pub holds the public key only and is what the other side is
// given (the servers' authorized_keys, the workers' server_public_key_file).
// Never overwrites a file. Exit codes: 0 written; 1 could not write (an
// existing pair, an I/O error); 2 bad flags.
#include <gflags/gflags.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/net/curve.h"
#include "cli/flag_parser.h"

DEFINE_string(out, ".", "directory to write NAME.key and NAME.pub into (created, mode 0700, when missing)");
DEFINE_string(name, "", "base name of the pair (required): letters, digits, '.', '_', '-'");

int main(int argc, char** argv) {
  tether::ParseFlagsOrDie(&argc, &argv,
                          {"tether-keygen --out=DIR --name=NAME\n"
                           "Writes a CurveZMQ key pair: DIR/NAME.key (secret and public key, mode 0600) and "
                           "DIR/NAME.pub (public key). Never overwrites."});
  if (FLAGS_name.empty()) {
    std::fprintf(stderr, "tether-keygen: flag --name is required (usage: %s)\n", gflags::ProgramUsage());
    return 2;
  }
  if (::mkdir(FLAGS_out.c_str(), 0700) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "tether-keygen: cannot create directory %s: %s\n", FLAGS_out.c_str(), std::strerror(errno));
    return 1;
  }
  auto keys = tether::NewCurveKeyPair();
  if (!keys.ok()) {
    std::fprintf(stderr, "tether-keygen: %s\n", keys.status().message().c_str());
    return 1;
  }
  const tether::Status st = tether::WriteCurveKeyFiles(FLAGS_out, FLAGS_name, *keys);
  if (!st.ok()) {
    std::fprintf(stderr, "tether-keygen: %s\n", st.message().c_str());
    return st.code() == tether::Status::Code::kInvalidArgument ? 2 : 1;
  }
  std::printf("wrote %s/%s.key (secret, mode 0600) and %s/%s.pub (public key %s)\n", FLAGS_out.c_str(),
              FLAGS_name.c_str(), FLAGS_out.c_str(), FLAGS_name.c_str(), keys->public_key.c_str());
  return 0;
}
