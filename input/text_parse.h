// Tokenizing helpers shared by the text readers (reader.cc: XMC, LIBSVM;
// arff_reader.cc: ARFF). Internal to tether_input; not a public API.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace tether::text {

/// Space, tab, CR, VT, FF. CR counts, so CRLF files tokenize like LF files.
bool IsSpace(char c);

/// The token in single quotes for messages, non-printable bytes as \xNN,
/// cut at 60 characters with "...".
std::string Quote(std::string_view tok);

/// "path:line: " (line 1-based).
std::string At(const std::string& path, int64_t line);

/// "0-based" or "1-based".
const char* BaseName(int base);

/// Whole-token unsigned parse of [b, e); signs are refused.
enum class UintParse { kOk, kInvalid, kTooLarge };
UintParse ParseUint(const char* b, const char* e, uint64_t* v);

/// A number token read as float, exactly (from_chars through double, so the
/// value is the float nearest the decimal; locale-independent). A leading
/// '+' is accepted. kNaN/kInf/kOverflow* name what was wrong (NumKindText).
enum class NumKind { kOk, kSyntax, kNaN, kInf, kOverflowDouble, kOverflowFloat };
const char* NumKindText(NumKind k);
NumKind ParseFloat(const char* b, const char* e, float* out);

/// 1-based line of byte `off` of `s`.
int64_t LineOfOffset(std::string_view s, size_t off);

/// Refuses bzip2/xz/zstd/zip/UTF-16 input and NUL bytes (InvalidArgument
/// naming `path`, and path:line for NUL and UTF-16) before any tokenizing.
Status CheckIsText(const std::string& path, std::string_view s);

}  // namespace tether::text
