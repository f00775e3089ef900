#include "core/names.h"

#include <cstdio>

namespace tether {
namespace {

bool NameChar(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '@' || c == '+' || c == ':' || c == '-';
}

std::string Hex(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "0x%02x", c);
  return buf;
}

}  // namespace

std::string NameProblem(const std::string& name) {
  if (name.empty()) return "is empty";
  if (name.size() > kMaxNameBytes)
    return "is " + std::to_string(name.size()) + " bytes long, above the " + std::to_string(kMaxNameBytes) +
           "-byte limit";
  for (size_t i = 0; i < name.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(name[i]);
    if (NameChar(c) && !(i == 0 && (c == '.' || c == '-'))) continue;
    const std::string shown = c >= 0x20 && c < 0x7f ? "'" + std::string(1, static_cast<char>(c)) + "' (" + Hex(c) + ")"
                                                    : Hex(c);
    return "byte " + std::to_string(i + 1) + " is " + shown +
           (i == 0 && (c == '.' || c == '-') ? ", which a name may not start with"
                                              : ", which a name may not hold: use letters, digits and . _ @ + : -");
  }
  return "";
}

std::string QuoteForLog(const std::string& text, size_t max_bytes) {
  std::string out = "'";
  for (size_t i = 0; i < text.size() && i < max_bytes; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (text.size() > max_bytes) out += "...";
  return out + "'";
}

}  // namespace tether
