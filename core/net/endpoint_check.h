// Start-up checks of the ZeroMQ endpoints a process is given on its command
// line or in its config, so that a typo is refused with the value and the
// fix before anything starts, rather than surfacing later as a connect that
// never answers or ZeroMQ's bare "Invalid argument".
//
// Ownership: none; the functions read their arguments only.
// Thread-safety: pure functions of their arguments and the resolver
// (getaddrinfo), safe from any thread.
#pragma once

#include <string>

#include "core/status.h"

namespace tether {

/// What the endpoint is for: a bind accepts the wildcard hosts ("*",
/// "0.0.0.0", "::") and port 0; a connect needs a host that resolves and a
/// port in [1, 65535].
enum class EndpointUse { kBind, kConnect };

/// The longest ipc:// path a Unix socket address holds (sun_path less its
/// terminating NUL): 107 bytes on Linux.
size_t MaxIpcPathBytes();

/// Checks `endpoint` ("tcp://HOST:PORT", "ipc://PATH", "inproc://NAME").
/// `source` names where it came from in messages ("flag
/// --server_addresses"). Errors, all InvalidArgument naming the source, the
/// value and the fix:
///   - no scheme ("127.0.0.1:5550": "write tcp://127.0.0.1:5550"), or an
///     unknown one ("udp://...");
///   - tcp: no ":PORT", a port that is not a number in [0, 65535] (0 only to
///     bind), a host that does not resolve (getaddrinfo's reason);
///   - ipc: an empty path, or one longer than MaxIpcPathBytes() (with the
///     advice to choose a shorter directory, e.g. TMPDIR);
///   - inproc: an empty name.
/// Resolving a host name may block for the resolver's own timeout.
[[nodiscard]] Status CheckEndpoint(const std::string& endpoint, const std::string& source, EndpointUse use);

/// Checks that `endpoint`, which a process binds to serve peers that run as
/// other processes (tether-server --listen), can be reached from another
/// process: inproc:// cannot (it lives inside one process). Errors:
/// InvalidArgument naming the source and the value, saying to use tcp:// or
/// ipc:// (or tether-launch --transport=inproc for a one-process job).
[[nodiscard]] Status CheckListenAcrossProcesses(const std::string& endpoint, const std::string& source);

}  // namespace tether
