#include "core/net/eval_frames.h"

#include <cstring>
#include <string>

#include "core/wire_limits.h"

namespace tether {
namespace {

// The partials' sizes travel in the body of the message's type: the
// request's (EVAL_GATHER) or the reply's.
google::protobuf::RepeatedField<uint64_t>* PartialSizes(MessageHeader* h) {
  return h->type() == EVAL_GATHER_REPLY ? h->mutable_eval_gather_reply()->mutable_partial_bytes()
                                        : h->mutable_eval_gather()->mutable_partial_bytes();
}

const google::protobuf::RepeatedField<uint64_t>& PartialSizes(const MessageHeader& h) {
  return h.type() == EVAL_GATHER_REPLY ? h.eval_gather_reply().partial_bytes() : h.eval_gather().partial_bytes();
}

}  // namespace

Status PackEvalPartials(const std::vector<EvalPartial>& partials, Message* m) {
  std::string bytes;
  google::protobuf::RepeatedField<uint64_t>* sizes = PartialSizes(&m->header);
  sizes->Clear();
  for (const EvalPartial& p : partials) {
    const size_t before = bytes.size();
    if (!p.AppendToString(&bytes)) return Status::InvalidArgument("evaluation partial does not serialize");
    sizes->Add(bytes.size() - before);
  }
  const size_t floats = (bytes.size() + sizeof(float) - 1) / sizeof(float);
  if (floats * sizeof(float) > kMaxFrameBytes)
    return Status::InvalidArgument("evaluation partials are " + std::to_string(bytes.size()) + " bytes, above the " +
                                   std::to_string(kMaxFrameBytes) + "-byte message limit");
  zmq::message_t values(floats * sizeof(float));
  if (floats > 0) {
    std::memset(values.data(), 0, values.size());
    std::memcpy(values.data(), bytes.data(), bytes.size());
  }
  m->values = std::move(values);
  m->header.set_num_values(floats);
  return Status::OK();
}

Status UnpackEvalPartials(const Message& m, const std::string& peer, std::vector<EvalPartial>* out) {
  out->clear();
  const auto* data = static_cast<const char*>(m.values.data());
  const uint64_t size = m.values.size();
  uint64_t at = 0;
  const google::protobuf::RepeatedField<uint64_t>& sizes = PartialSizes(m.header);
  for (int i = 0; i < sizes.size(); ++i) {
    const uint64_t n = sizes.Get(i);
    if (n > size - at)
      return Status::DataLoss(peer + ": evaluation partial " + std::to_string(i) + " of " + std::to_string(n) +
                              " bytes overruns the " + std::to_string(size) + "-byte values frame");
    EvalPartial p;
    if (!p.ParseFromArray(data + at, static_cast<int>(n)))
      return Status::DataLoss(peer + ": evaluation partial " + std::to_string(i) + " does not parse");
    out->push_back(std::move(p));
    at += n;
  }
  return Status::OK();
}

}  // namespace tether
