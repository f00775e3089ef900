#include "core/endpoint_list.h"

#include <cctype>
#include <map>

namespace tether {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A port of 1 to 5 digits loses its leading zeros; anything else stays.
std::string NormalPort(const std::string& port) {
  if (port.empty() || port.size() > 5) return port;
  for (char c : port)
    if (!std::isdigit(static_cast<unsigned char>(c))) return port;
  return std::to_string(std::stoi(port));
}

}  // namespace

std::string NormalEndpoint(const std::string& endpoint) {
  const size_t scheme_end = endpoint.find("://");
  if (scheme_end == std::string::npos) return endpoint;
  const std::string scheme = Lower(endpoint.substr(0, scheme_end));
  const std::string rest = endpoint.substr(scheme_end + 3);
  const size_t colon = rest.rfind(':');
  if (scheme != "tcp" || colon == std::string::npos) return scheme + "://" + rest;
  std::string host = Lower(rest.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.find(':') != std::string::npos) host = "[" + host + "]";  // IPv6
  return scheme + "://" + host + ":" + NormalPort(rest.substr(colon + 1));
}

Status CheckDistinctEndpoints(const std::vector<std::string>& endpoints, const std::string& source) {
  std::map<std::string, size_t> first;  // the normal spelling -> its 1-based entry
  for (size_t i = 0; i < endpoints.size(); ++i) {
    const auto [at, added] = first.emplace(NormalEndpoint(endpoints[i]), i + 1);
    if (added) continue;
    std::string list;
    for (const std::string& e : endpoints) list += (list.empty() ? "" : ",") + e;
    return Status::InvalidArgument(source + ": names " + at->first + " twice (entries " +
                                   std::to_string(at->second) + " and " + std::to_string(i + 1) + " of '" + list +
                                   "'): each server shard needs an endpoint of its own");
  }
  return Status::OK();
}

}  // namespace tether
