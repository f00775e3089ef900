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

void ResendWindow::Keep(Message* m) {
  DCHECK(kept_.empty() || kept_.back().header.request_id() < m->header.request_id())
      << "request ids must grow";
  kept_.push_back(SharedCopy(m));
}

void ResendWindow::DropNewest() {
  if (!kept_.empty()) kept_.pop_back();
}

size_t ResendWindow::Ack(uint64_t request_id) {
  size_t forgotten = 0;
  while (!kept_.empty() && kept_.front().header.request_id() <= request_id) {
    kept_.pop_front();
    ++forgotten;
  }
  return forgotten;
}

}  // namespace tether
