#include "server/outbox.h"

namespace tether {

void Outbox::SendError(const std::string& identity, const MessageHeader& request, const std::string& error) {
  Message reply;
  reply.header.set_type(ERROR_REPLY);
  reply.header.set_request_id(request.request_id());
  reply.header.set_table_id(request.table_id());
  reply.header.set_error(log_prefix_ + error);
  Send(identity, &reply, request.has_sender_rank() ? request.sender_rank() : -1);
}

}  // namespace tether
