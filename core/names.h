// Job ids and names, checked where they enter (the config, a flag, a
// launcher's environment, a peer's HELLO): they reach log lines, file and
// folder names (checkpoints, rendezvous entries, metrics files) and the
// Prometheus page's labels, so only a plain alphabet is taken.
// Pure functions; thread-safe.
#pragma once

#include <string>

namespace tether {

/// At most this many bytes in a job id or a name.
inline constexpr size_t kMaxNameBytes = 128;

/// "" when `name` is a valid job id or name: 1 to kMaxNameBytes bytes of
/// [A-Za-z0-9._@+:-], not starting with '.' or '-'. Otherwise why not,
/// naming the first bad character by position and code ("byte 4 is ' '
/// (0x20), which a name may not hold: use letters, digits and . _ @ + : -").
std::string NameProblem(const std::string& name);

/// `text` as it may go into a log line: printable ASCII as is, anything
/// else as \xHH, at most `max_bytes` of it (then "..."), in single quotes.
std::string QuoteForLog(const std::string& text, size_t max_bytes = 64);

}  // namespace tether
