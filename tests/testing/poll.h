// PollUntil: waits for a condition another thread or process brings about,
// for at most a bound, by looking again every few milliseconds: the way
// tests wait for an event they cannot block on (a child process reaped, a
// flag another thread sets), never a fixed sleep.
//
// Thread-safety: `done` runs on the caller's thread; it must read what
// other threads write through atomics or thread-safe accessors.
#pragma once

#include <chrono>
#include <thread>

namespace tether::testing {

/// Calls `done` until it returns true or `timeout_ms` milliseconds passed,
/// every `interval_ms` (default 5); whether it returned true (it is called
/// once more at the bound).
template <typename Done>
bool PollUntil(int timeout_ms, Done&& done, int interval_ms = 5) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
  }
  return done();
}

}  // namespace tether::testing
