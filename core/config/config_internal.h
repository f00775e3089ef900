// What the files of core/config/ share and nothing else needs (the public
// interface is core/config.h).
//
// Ownership: a collector owns the error it keeps.
// Thread-safety: an error collector belongs to one parse.
#pragma once

#include <google/protobuf/io/tokenizer.h>

#include <string>

namespace tether {
namespace config_internal {

// Collects the parser's first error with its 1-based line.
class FirstErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber /*column*/,
                const std::string& message) override {
    if (line_ < 0) {
      line_ = line + 1;  // the parser counts lines from 0
      message_ = message;
    }
  }
  int line() const { return line_; }
  const std::string& message() const { return message_; }

 private:
  int line_ = -1;
  std::string message_;
};

}  // namespace config_internal
}  // namespace tether
