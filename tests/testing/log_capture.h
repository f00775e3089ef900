// LogCapture: collects the glog lines written while it is alive, so that a
// test can assert a warning's exact words (and that it came once).
//
// Ownership: registers itself as a glog sink in its constructor and removes
// itself in its destructor. Thread-safety: lines may arrive from any thread;
// Matching() may be called from any thread.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include <glog/logging.h>

namespace tether::testing {

class LogCapture : public google::LogSink {
 public:
  LogCapture() { google::AddLogSink(this); }
  ~LogCapture() override { google::RemoveLogSink(this); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  void send(google::LogSeverity, const char*, const char*, int, const struct ::tm*, const char* message,
            size_t message_len) override {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.emplace_back(message, message_len);
  }
  /// The lines that contain every one of `parts`, in the order written.
  std::vector<std::string> Matching(const std::vector<std::string>& parts) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& l : lines_) {
      bool all = true;
      for (const auto& p : parts) all = all && l.find(p) != std::string::npos;
      if (all) out.push_back(l);
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

}  // namespace tether::testing
