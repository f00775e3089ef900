#include "telemetry/progress_eta.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace tether {

double EtaSeconds(double elapsed_s, int done_epochs, double epoch_fraction, int epochs) {
  if (epochs <= 0) return -1;
  const double done = std::clamp((done_epochs + std::clamp(epoch_fraction, 0.0, 1.0)) / epochs, 0.0, 1.0);
  if (done <= 0 || !(elapsed_s >= 0)) return -1;
  return elapsed_s * (1.0 - done) / done;
}

std::string FormatEta(double seconds) {
  if (!(seconds >= 0)) return "?";
  const int64_t s = static_cast<int64_t>(std::ceil(std::min(seconds, 1e9)));
  char out[48];
  if (s < 60)
    std::snprintf(out, sizeof(out), "%llds", static_cast<long long>(s));
  else if (s < 3600)
    std::snprintf(out, sizeof(out), "%lldm %02llds", static_cast<long long>(s / 60), static_cast<long long>(s % 60));
  else
    std::snprintf(out, sizeof(out), "%lldh %02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>((s % 3600) / 60));
  return out;
}

}  // namespace tether
