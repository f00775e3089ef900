#include "core/peer_limits.h"

#include <map>
#include <mutex>
#include <utility>

#include "core/process_limits.h"

namespace tether {
namespace {

std::mutex g_drops_mu;
std::map<std::pair<std::string, std::string>, uint64_t>& Drops() {
  static auto* drops = new std::map<std::pair<std::string, std::string>, uint64_t>();
  return *drops;
}

}  // namespace

ConnectionBudget& ConnectionBudget::Process() {
  static auto* budget =
      new ConnectionBudget(ConnectionDescriptorBudget(CurrentProcessLimits(), kReservedDescriptors));
  return *budget;
}

bool ConnectionBudget::TryAcquire() {
  uint64_t n = in_use_.load();
  while (n < capacity_)
    if (in_use_.compare_exchange_weak(n, n + 1)) return true;
  return false;
}

void ConnectionBudget::Release() {
  uint64_t n = in_use_.load();
  while (n > 0 && !in_use_.compare_exchange_weak(n, n - 1)) {
  }
}

void CountPeerDrop(const std::string& listener, const std::string& reason) {
  std::lock_guard<std::mutex> lock(g_drops_mu);
  ++Drops()[{listener, reason}];
}

std::vector<std::tuple<std::string, std::string, uint64_t>> PeerDrops() {
  std::lock_guard<std::mutex> lock(g_drops_mu);
  std::vector<std::tuple<std::string, std::string, uint64_t>> out;
  for (const auto& [key, n] : Drops()) out.emplace_back(key.first, key.second, n);
  return out;
}

}  // namespace tether
