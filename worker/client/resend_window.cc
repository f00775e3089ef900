#include "worker/client/resend_window.h"

#include <glog/logging.h>

namespace tether {

Message SharedCopy(Message* m) {
  Message c;
  c.header = m->header;
  c.keys.copy(m->keys);
  c.values.copy(m->values);
  return c;
}

void ResendWindow::Keep(Message* m, bool owed_reply) {
  DCHECK(kept_.empty() || kept_.back().header.request_id() < m->header.request_id())
      << "request ids must grow";
  kept_.push_back(SharedCopy(m));
  owed_reply_.push_back(owed_reply);
}

void ResendWindow::DropNewest() {
  if (kept_.empty()) return;
  kept_.pop_back();
  owed_reply_.pop_back();
}

size_t ResendWindow::Ack(uint64_t request_id) {
  const size_t before = kept_.size();
  size_t out = 0;
  for (size_t i = 0; i < kept_.size(); ++i) {
    const uint64_t id = kept_[i].header.request_id();
    const bool forget = id == request_id || (id < request_id && !owed_reply_[i]);
    if (forget) continue;
    if (out != i) {
      kept_[out] = std::move(kept_[i]);
      owed_reply_[out] = owed_reply_[i];
    }
    ++out;
  }
  kept_.resize(out);
  owed_reply_.resize(out);
  return before - out;
}

}  // namespace tether
