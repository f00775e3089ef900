// The port files of a launched job: each tether-server writes the endpoint
// it bound to --port_file (renaming a complete file into place), and the
// launcher reads it back to tell the workers where the shards are.
//
// Ownership: returns values.
// Thread-safety: no shared state.
#pragma once

#include <optional>
#include <string>

#include "core/status.h"

namespace tether {

/// The endpoint in the port file at `path` ("tcp://HOST:PORT" with a port
/// other than 0, or "ipc://PATH"; trailing white space dropped), or nullopt
/// while the file is not there yet. A file that exists is whole, so an
/// empty or malformed one is an error, not "not yet". Errors: IOError (the
/// file cannot be read), DataLoss (not a bound endpoint, quoting the text).
StatusOr<std::optional<std::string>> ReadPortFile(const std::string& path);

}  // namespace tether
