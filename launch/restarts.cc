#include "launch/restarts.h"

#include <glog/logging.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace tether {

bool NoCheckpointYet(const std::string& dir) {
  std::error_code ec;
  if (dir.empty() || !std::filesystem::exists(dir, ec)) return true;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (std::filesystem::exists(it->path() / kManifestName, ec)) return false;
  return true;
}

int RunWithRestarts(LaunchOptions options, const RestartPolicy& policy) {
  const std::vector<std::string> forwarded = options.forwarded;
  if (!policy.resume_from.empty()) options.forwarded.push_back("--resume_from=" + policy.resume_from);
  const auto job_start = std::chrono::steady_clock::now();
  const auto total_timeout = options.timeout;
  for (int attempt = 0;; ++attempt) {
    const int code = RunLaunch(options);
    if (code != 1 || attempt >= policy.max_restarts) {
      if (code == 0 && attempt > 0)
        std::printf("tether-launch: job finished after %d restart(s) from checkpoints\n", attempt);
      return code;
    }
    auto ckpt = ResolveCheckpoint(policy.checkpoint_dir);
    if (!ckpt.ok() && NoCheckpointYet(policy.checkpoint_dir)) {
      // Failed before its first checkpoint was complete: start over.
      const uint64_t generation = policy.generation + static_cast<uint64_t>(attempt) + 1;
      LOG(WARNING) << "[launch] the job failed before its first checkpoint under " << policy.checkpoint_dir
                   << " was complete; restart " << attempt + 1 << " of " << policy.max_restarts
                   << " from the start (everything trained is redone), as generation " << generation;
      std::fprintf(stderr, "[launch] restart %d of %d from the start: no checkpoint was taken yet\n", attempt + 1,
                   policy.max_restarts);
      options.forwarded = forwarded;
      if (!policy.resume_from.empty()) options.forwarded.push_back("--resume_from=" + policy.resume_from);
      options.forwarded.push_back("--generation=" + std::to_string(generation));
      options.generation = generation;
      const auto left = total_timeout - std::chrono::duration_cast<std::chrono::seconds>(
                                            std::chrono::steady_clock::now() - job_start);
      if (left <= std::chrono::seconds(0)) {
        LOG(ERROR) << "[launch] no time left (--timeout_s) to restart the job";
        return 124;
      }
      options.timeout = left;
      continue;
    }
    if (!ckpt.ok()) {
      LOG(ERROR) << "[launch] the job failed and cannot be restarted: " << ckpt.status().message();
      return code;
    }
    auto manifest = ReadManifest(*ckpt);
    if (!manifest.ok()) {
      LOG(ERROR) << "[launch] the job failed and cannot be restarted: " << manifest.status().message();
      return code;
    }
    if (manifest->final()) {
      LOG(ERROR) << "[launch] the job failed after its final checkpoint (" << *ckpt << "): nothing to restart";
      return code;
    }
    const uint64_t generation = policy.generation + static_cast<uint64_t>(attempt) + 1;
    const double age_s =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() -
        manifest->written_unix_s();
    LOG(WARNING) << "[launch] the job failed; restart " << attempt + 1 << " of " << policy.max_restarts << " from "
                 << *ckpt << " (clock " << manifest->clock() << ", written " << age_s
                 << " s ago: the training since then is lost and redone), as generation " << generation;
    std::fprintf(stderr, "[launch] restart %d of %d from %s (clock %lld; %.1f s of training since it is redone)\n",
                 attempt + 1, policy.max_restarts, ckpt->c_str(), static_cast<long long>(manifest->clock()), age_s);
    options.forwarded = forwarded;
    options.forwarded.push_back("--resume_from=" + *ckpt);
    options.forwarded.push_back("--generation=" + std::to_string(generation));
    options.generation = generation;
    const auto left = total_timeout - std::chrono::duration_cast<std::chrono::seconds>(
                                          std::chrono::steady_clock::now() - job_start);
    if (left <= std::chrono::seconds(0)) {
      LOG(ERROR) << "[launch] no time left (--timeout_s) to restart the job";
      return 124;
    }
    options.timeout = left;
  }
}

}  // namespace tether
