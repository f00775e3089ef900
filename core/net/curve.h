// CurveZMQ keys for Tether: key files (tether-keygen writes them, every
// process reads them), the job's security.curve section turned into the
// CurveOptions of core/net/transport.h, and the warning for a server that
// listens beyond loopback without authentication.
//
// Key file format: ZeroMQ's certificate format, as CZMQ's zcert_save writes
// it (keys made by CZMQ's tools work here, and the other way round):
//
//   #   ZeroMQ CURVE **Secret** Certificate
//   metadata
//       name = "worker"
//   curve
//       public-key = "<40 Z85 characters>"
//       secret-key = "<40 Z85 characters>"
//
// NAME.key has both keys and mode 0600; NAME.pub only the public key. A line
// starting with '#' is a comment; other metadata entries are ignored.
//
// Everything here is a function of its arguments and the files it names;
// thread-compatible. No cryptography is done here: keys are made and used by
// libzmq (zmq_curve_keypair, zmq_curve_public, ZMQ_CURVE_* options).
#pragma once

#include <string>
#include <vector>

#include "core/net/transport.h"
#include "core/status.h"
#include "proto/config.pb.h"

namespace tether {

/// A CURVE key pair, each key as 40 characters of Z85.
struct CurveKeyPair {
  std::string public_key;
  std::string secret_key;
};

/// A fresh key pair from libzmq (zmq_curve_keypair, libsodium's random
/// source). Errors: Internal when libzmq was built without CURVE.
StatusOr<CurveKeyPair> NewCurveKeyPair();

/// Writes DIR/NAME.key (both keys, mode 0600) and DIR/NAME.pub (the public
/// key, mode 0644). Each file is written under a temporary name, synced,
/// and linked to its name, so a reader never sees half a key and nothing is
/// ever overwritten. `name`: letters, digits, '.', '_', '-'. Errors:
/// FailedPrecondition when either file exists (naming it; nothing is
/// written), InvalidArgument for a bad name, IOError naming the file.
Status WriteCurveKeyFiles(const std::string& dir, const std::string& name, const CurveKeyPair& keys);

/// Reads a key file. With `need_secret` the file must be readable by its
/// owner only (no group or other permission bits: mode 0600 or 0400) and
/// hold a secret key whose public key (zmq_curve_public) is the one in the
/// file; without it only the public key is read (a .pub or a .key file; the
/// mode is not checked). The file is opened without blocking and must be a
/// regular file of at most 64 KiB (core/regular_file.h). Errors: NotFound
/// "FILE: no such key file"; InvalidArgument "key file FILE: is a FIFO
/// (named pipe), not a regular file" (a device, a directory, ...) or "...
/// is N bytes, more than the 65536-byte limit for a key file";
/// PermissionDenied-like FailedPrecondition "FILE: mode 0644 lets other
/// users read the secret key; chmod 600 FILE"; InvalidArgument "FILE:LINE: ..." for a line that is
/// not of the format, a key that is not 40 characters of Z85, a missing key
/// (naming the file), or a public key that does not belong to the secret key.
StatusOr<CurveKeyPair> ReadCurveKeyFile(const std::string& path, bool need_secret);

/// The public keys (Z85) of `entries`: each a key file or a directory whose
/// *.pub files are all read (sorted by name; subdirectories are not
/// entered). Errors: those of ReadCurveKeyFile; NotFound for a missing
/// entry; InvalidArgument when no key is found at all.
StatusOr<std::vector<std::string>> ReadAuthorizedKeys(const std::vector<std::string>& entries);

/// A server's CURVE settings from `curve` (security.curve): its key pair and,
/// in `*authorized`, the client public keys to admit (for a ZapHandler,
/// core/net/zap_handler.h). Errors: InvalidArgument "config field
/// security.curve.server_secret_key_file: required on servers ..." for a
/// missing field; those of ReadCurveKeyFile and ReadAuthorizedKeys.
StatusOr<CurveOptions> CurveServerOptions(const CurveConfig& curve, std::vector<std::string>* authorized);

/// A worker's (or any client's) CURVE settings from `curve`: its key pair
/// and the servers' public key. Errors: InvalidArgument naming a missing
/// field, or a client_public_key_file that does not match the key pair;
/// those of ReadCurveKeyFile.
StatusOr<CurveOptions> CurveClientOptions(const CurveConfig& curve);

/// A server process as the CURVE client of another server process (a
/// replica host connecting to the primary of the shard it copies,
/// server/replica_host.h): the servers share one key pair, so it is this
/// socket's pair and the peer's public key at once. Workers never hold it;
/// a primary admits it for replication only (server/replica_link.h).
/// Errors: as CurveServerOptions.
StatusOr<CurveOptions> ServerPeerCurveClient(const CurveConfig& curve);

/// The rendezvous store's CURVE settings (core/net/rendezvous.h), from the
/// job's security.curve: the store holds the servers' key pair, and admits
/// (in `*admitted`) the workers' authorized keys and the servers' own
/// public key (servers publish their endpoints with it). Errors: as
/// CurveServerOptions.
StatusOr<CurveOptions> RendezvousCurveServer(const CurveConfig& curve, std::vector<std::string>* admitted);

/// A client of the rendezvous store: a server (`as_server`: its own key
/// pair, and its own public key as the store's) or a worker (as
/// CurveClientOptions). Errors: as CurveServerOptions / CurveClientOptions.
StatusOr<CurveOptions> RendezvousCurveClient(const CurveConfig& curve, bool as_server);

/// For a socket bound at `bound_endpoint` (as ZeroMQ reports it, numeric)
/// without authentication: the warning to log when the address is not a
/// loopback one ("tcp://0.0.0.0:P", "tcp://10.0.0.1:P"), else "" (loopback
/// tcp://, ipc://, inproc://). The text contains the phrase "anyone who can
/// reach" and names `what` ("server 0").
std::string UnauthenticatedBindWarning(const std::string& what, const std::string& bound_endpoint);

}  // namespace tether
