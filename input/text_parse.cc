#include "input/text_parse.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <system_error>

namespace tether::text {
namespace {

// Only called for a token that from_chars accepted as a whole but could not
// represent: its decimal magnitude is then beyond ±300, so the sign of
// (position of the first significant digit + exponent) says whether it
// overflowed or underflowed. Avoids strtod, whose result depends on the locale.
bool OutOfRangeIsOverflow(const char* s, const char* e) {
  if (s < e && (*s == '-' || *s == '+')) ++s;
  bool seen_point = false, seen_digit = false;
  int64_t int_digits = 0, frac_zeros = 0;
  const char* p = s;
  for (; p < e && *p != 'e' && *p != 'E'; ++p) {
    if (*p == '.') {
      seen_point = true;
    } else if (seen_digit) {
      if (!seen_point) ++int_digits;
    } else if (*p != '0') {
      seen_digit = true;
      if (!seen_point) int_digits = 1;
    } else if (seen_point) {
      ++frac_zeros;
    }
  }
  int64_t exponent = 0;
  if (p < e) {
    ++p;
    bool negative = false;
    if (p < e && (*p == '+' || *p == '-')) negative = *p++ == '-';
    for (; p < e; ++p) exponent = std::min<int64_t>(exponent * 10 + (*p - '0'), int64_t{1} << 40);
    if (negative) exponent = -exponent;
  }
  const int64_t magnitude = int_digits > 0 ? int_digits : -frac_zeros;
  return magnitude + exponent > 0;
}

}  // namespace

// CR counts as whitespace so that CRLF files tokenize exactly like LF files.
bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

// Tokens go into error messages; binary bytes must not reach a terminal raw.
std::string Quote(std::string_view tok) {
  constexpr size_t kMaxShown = 60;
  std::string out = "'";
  const size_t n = std::min(tok.size(), kMaxShown);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(tok[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (tok.size() > n) out += "...";
  out += "'";
  return out;
}

std::string At(const std::string& path, int64_t line) {
  return path + ":" + std::to_string(line) + ": ";
}

const char* BaseName(int base) { return base == 0 ? "0-based" : "1-based"; }

// Whole-token unsigned parse; from_chars rejects signs, so "-1" and "+1" fail.
UintParse ParseUint(const char* b, const char* e, uint64_t* v) {
  if (b == e) return UintParse::kInvalid;
  const auto r = std::from_chars(b, e, *v);
  if (r.ec == std::errc::result_out_of_range) return UintParse::kTooLarge;
  if (r.ec != std::errc() || r.ptr != e) return UintParse::kInvalid;
  return UintParse::kOk;
}


const char* NumKindText(NumKind k) {
  switch (k) {
    case NumKind::kNaN: return "is NaN";
    case NumKind::kInf: return "is infinite";
    case NumKind::kOverflowDouble: return "overflows double (not read as inf)";
    case NumKind::kOverflowFloat: return "overflows float (not read as inf)";
    default: return "is not a number";
  }
}

// from_chars is locale-independent and exact; it accepts "nan", "inf",
// "infinity" in any case, which we want to see so we can reject them by name.
NumKind ParseFloat(const char* b, const char* e, float* out) {
  const char* s = b;
  if (s < e && *s == '+') {  // LIBSVM labels are written "+1"
    ++s;
    if (s == e || *s == '+' || *s == '-') return NumKind::kSyntax;
  }
  double d = 0;
  const auto r = std::from_chars(s, e, d);
  if (r.ec == std::errc::invalid_argument || r.ptr != e) return NumKind::kSyntax;
  if (r.ec == std::errc::result_out_of_range) {
    if (OutOfRangeIsOverflow(s, e)) return NumKind::kOverflowDouble;
    // Underflow: anything below the double range is 0 as a float anyway.
    d = *s == '-' ? -0.0 : 0.0;
  }
  if (std::isnan(d)) return NumKind::kNaN;
  if (std::isinf(d)) return NumKind::kInf;
  const float f = static_cast<float>(d);
  if (std::isinf(f)) return NumKind::kOverflowFloat;
  *out = f;
  return NumKind::kOk;
}

int64_t LineOfOffset(std::string_view s, size_t off) {
  return 1 + std::count(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(off), '\n');
}

// Refuses anything that is not text before a single byte is tokenized.
Status CheckIsText(const std::string& path, std::string_view s) {
  const auto starts = [&s](const char* m, size_t n) {
    return s.size() >= n && std::memcmp(s.data(), m, n) == 0;
  };
  if (starts("BZh", 3) && s.size() > 3 && s[3] >= '1' && s[3] <= '9') {
    return Status::InvalidArgument(path + ": bzip2-compressed input is not supported; "
                                   "decompress it or recompress with gzip");
  }
  if (starts("\xfd" "7zXZ\0", 6)) {
    return Status::InvalidArgument(path + ": xz-compressed input is not supported; "
                                   "decompress it or recompress with gzip");
  }
  if (starts("\x28\xb5\x2f\xfd", 4)) {
    return Status::InvalidArgument(path + ": zstd-compressed input is not supported; "
                                   "decompress it or recompress with gzip");
  }
  if (starts("PK\x03\x04", 4)) {
    return Status::InvalidArgument(path + ": zip archives are not supported; extract the file");
  }
  if (starts("\xff\xfe", 2) || starts("\xfe\xff", 2)) {
    return Status::InvalidArgument(At(path, 1) + "UTF-16 text is not supported; "
                                   "save the file as ASCII/UTF-8");
  }
  const void* nul = std::memchr(s.data(), '\0', s.size());
  if (nul != nullptr) {
    const size_t off = static_cast<size_t>(static_cast<const char*>(nul) - s.data());
    return Status::InvalidArgument(At(path, LineOfOffset(s, off)) + "binary data (NUL byte at offset " +
                                   std::to_string(off) + "): not a text data file");
  }
  return Status::OK();
}

}  // namespace tether::text
