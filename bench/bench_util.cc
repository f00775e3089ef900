#include "bench/bench_util.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace tether {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::vector<int64_t> ParseList(const std::string& s) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(static_cast<int64_t>(std::stod(item)));
  }
  return out;
}

std::vector<std::string> ParseNames(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool ParseShapes(const char* mode, const std::string& text, std::vector<std::pair<int64_t, int64_t>>* shapes) {
  for (const std::string& item : ParseNames(text)) {
    const size_t x = item.find('x');
    const int64_t n = x == std::string::npos ? 0 : static_cast<int64_t>(std::stod(item.substr(0, x)));
    const int64_t dim = x == std::string::npos ? 0 : std::stoll(item.substr(x + 1));
    if (n < 1 || dim < 1) {
      std::fprintf(stderr, "tether-bench %s: bad shape '%s' in --shapes (KEYSxDIM, both ≥ 1)\n", mode, item.c_str());
      return false;
    }
    shapes->emplace_back(n, dim);
  }
  return true;
}

Summary Summarize(std::vector<double> t) {
  Summary s;
  s.reps = static_cast<int>(t.size());
  if (t.empty()) return s;
  std::sort(t.begin(), t.end());
  s.median = t.size() % 2 ? t[t.size() / 2] : 0.5 * (t[t.size() / 2 - 1] + t[t.size() / 2]);
  s.p99 = t[std::min(t.size() - 1, static_cast<size_t>(std::ceil(0.99 * t.size())) - 1)];
  return s;
}

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, v);
  return buf;
}

std::string Si(double v) {
  if (v >= 1e9) return Fmt("%.2fG", v / 1e9);
  if (v >= 1e6) return Fmt("%.2fM", v / 1e6);
  if (v >= 1e3) return Fmt("%.1fk", v / 1e3);
  return Fmt("%.0f", v);
}

}  // namespace tether
