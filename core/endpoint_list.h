// Lists of server endpoints (--server_addresses, cluster.server_addresses):
// one shard per entry, so an endpoint named twice is refused at start. Two
// shards at one address would be one server answering for both, and a
// worker would wait for the second until its start-up timeout, then blame
// a dropped connection.
//
// Pure functions of their arguments; thread-safe. Names are not resolved
// (core/net/endpoint_check.h checks each endpoint on its own).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace tether {

/// `endpoint` in one spelling per place: the scheme and a tcp host in lower
/// case, an IPv6 host in brackets, a tcp port without leading zeros
/// ("TCP://LocalHost:05550" -> "tcp://localhost:5550"). "localhost" and
/// "127.0.0.1" stay two spellings. Anything it cannot read comes back as it
/// is.
std::string NormalEndpoint(const std::string& endpoint);

/// Refuses a list that names one endpoint twice, compared as NormalEndpoint
/// spells them. `source` names the list ("flag --server_addresses").
/// Error: InvalidArgument "flag --server_addresses: names
/// tcp://127.0.0.1:5550 twice (entries 1 and 2 of 'LIST'): each server shard
/// needs an endpoint of its own".
[[nodiscard]] Status CheckDistinctEndpoints(const std::vector<std::string>& endpoints, const std::string& source);

}  // namespace tether
