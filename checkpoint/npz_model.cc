#include "checkpoint/npz_model.h"

#include <zip.h>

#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint/model_tensors.h"
#include "core/memory_fit.h"

namespace tether {
namespace {

using model_file_internal::DType;
using model_file_internal::ElementCount;
using model_file_internal::ItemBytes;
using model_file_internal::kMetadataKey;
using model_file_internal::ModelTensors;
using model_file_internal::NpyDescr;
using model_file_internal::TensorView;

// numpy.load refuses longer headers by default (its max_header_size): a
// header is a short dict, and a length field is never trusted beyond it.
constexpr uint64_t kMaxNpyHeaderBytes = 10000;
// NumPy's own bound on an array's rank (NPY_MAXDIMS in NumPy 2).
constexpr size_t kMaxNpyRank = 64;
// Deflate's largest ratio (zlib's technical details: 1032:1): a member
// that claims more uncompressed bytes than that cannot be honest.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr char kNpySuffix[] = ".npy";

// A cursor over the dict literal of an NPY header.
class NpyDictParser {
 public:
  explicit NpyDictParser(std::string_view s) : s_(s) {}

  Status Fail(const std::string& what) const {
    return Status::DataLoss("NPY header: " + what + " at byte " + std::to_string(pos_) + " of the dict '" +
                            Printable(s_) + "'");
  }
  void Spaces() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  bool Eat(char c) {
    if (pos_ >= s_.size() || s_[pos_] != c) return false;
    ++pos_;
    return true;
  }
  Status Expect(char c) { return Eat(c) ? Status::OK() : Fail(std::string("expected '") + c + "'"); }
  bool AtEnd() const { return pos_ == s_.size(); }

  // A quoted string without escapes, of printable ASCII.
  StatusOr<std::string> String() {
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"')) return Fail("expected a quoted string");
    const char quote = s_[pos_++];
    const size_t begin = pos_;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      if (s_[pos_] < 0x20 || s_[pos_] > 0x7e || s_[pos_] == '\\') return Fail("a string holds an escape or a byte out of printable ASCII");
      ++pos_;
    }
    if (pos_ >= s_.size()) return Fail("an unterminated string");
    return std::string(s_.substr(begin, pos_++ - begin));
  }

  StatusOr<bool> Bool() {
    for (const auto& [word, value] : {std::pair<std::string_view, bool>{"True", true}, {"False", false}}) {
      if (s_.substr(pos_, word.size()) != word) continue;
      pos_ += word.size();
      return value;
    }
    return Fail("expected True or False");
  }

  // A tuple of non-negative decimal integers: "()", "(n,)", "(n, m)", ...
  StatusOr<std::vector<uint64_t>> Tuple() {
    TETHER_RETURN_IF_ERROR(Expect('('));
    std::vector<uint64_t> out;
    Spaces();
    while (!Eat(')')) {
      if (out.size() == kMaxNpyRank) return Fail("a shape of more than " + std::to_string(kMaxNpyRank) + " dimensions");
      TETHER_ASSIGN_OR_RETURN(const uint64_t n, Int());
      out.push_back(n);
      Spaces();
      if (Eat(',')) {
        Spaces();
        continue;
      }
      if (out.size() == 1) return Fail("'(n)' is no tuple: a shape of one dimension is written '(n,)'");
      TETHER_RETURN_IF_ERROR(Expect(')'));
      break;
    }
    return out;
  }

 private:
  StatusOr<uint64_t> Int() {
    const size_t begin = pos_;
    uint64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const uint64_t d = static_cast<uint64_t>(s_[pos_] - '0');
      if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) return Fail("a dimension above 2^64 - 1");
      v = v * 10 + d;
      ++pos_;
    }
    if (pos_ == begin) return Fail("expected a non-negative integer");
    if (s_[begin] == '0' && pos_ - begin > 1) return Fail("a dimension with a leading zero");
    return v;
  }

  static std::string Printable(std::string_view s) {
    std::string out;
    for (char c : s.substr(0, 200)) out += (c >= 0x20 && c <= 0x7e) ? c : '?';
    return s.size() > 200 ? out + "..." : out;
  }

  std::string_view s_;
  size_t pos_ = 0;
};

// The dict literal of an NPY header (padding and the final '\n' removed).
Status ParseNpyDict(std::string_view dict, NpyHeader* h) {
  NpyDictParser p(dict);
  p.Spaces();
  TETHER_RETURN_IF_ERROR(p.Expect('{'));
  std::set<std::string> seen;
  for (p.Spaces(); !p.Eat('}'); p.Spaces()) {
    TETHER_ASSIGN_OR_RETURN(const std::string key, p.String());
    if (!seen.insert(key).second) return p.Fail("key '" + key + "' given twice");
    p.Spaces();
    TETHER_RETURN_IF_ERROR(p.Expect(':'));
    p.Spaces();
    if (key == "descr") {
      TETHER_ASSIGN_OR_RETURN(h->descr, p.String());
    } else if (key == "fortran_order") {
      TETHER_ASSIGN_OR_RETURN(const bool fortran, p.Bool());
      if (fortran) return p.Fail("'fortran_order' is True: only C-order arrays are read");
    } else if (key == "shape") {
      TETHER_ASSIGN_OR_RETURN(h->shape, p.Tuple());
    } else {
      return p.Fail("unknown key '" + key + "' (an NPY header has 'descr', 'fortran_order' and 'shape')");
    }
    p.Spaces();
    if (p.Eat(',')) continue;
    p.Spaces();
    TETHER_RETURN_IF_ERROR(p.Expect('}'));
    break;
  }
  p.Spaces();
  if (!p.AtEnd()) return p.Fail("bytes after the dict");
  for (const char* key : {"descr", "fortran_order", "shape"})
    if (seen.count(key) == 0) return p.Fail(std::string("no key '") + key + "'");
  return Status::OK();
}

}  // namespace

StatusOr<NpyHeader> ParseNpyHeader(std::string_view npy) {
  const auto bad = [](const std::string& what) { return Status::DataLoss("NPY: " + what); };
  if (npy.size() < 8 || npy.substr(0, 6) != std::string_view("\x93NUMPY", 6))
    return bad("not an NPY file (it does not start with \\x93NUMPY)");
  const int major = static_cast<unsigned char>(npy[6]), minor = static_cast<unsigned char>(npy[7]);
  if ((major != 1 && major != 2) || minor != 0)
    return bad("format version " + std::to_string(major) + "." + std::to_string(minor) +
               " is not read (1.0 and 2.0 are)");
  const size_t prefix = major == 1 ? 10 : 12;
  if (npy.size() < prefix) return bad("truncated in its header length");
  uint64_t len = 0;
  for (size_t i = prefix; i-- > 8;) len = (len << 8) | static_cast<unsigned char>(npy[i]);
  if (len > kMaxNpyHeaderBytes)
    return bad("header length " + std::to_string(len) + " is above the " + std::to_string(kMaxNpyHeaderBytes) +
               "-byte limit numpy.load keeps");
  if (len > npy.size() - prefix)
    return bad("header length " + std::to_string(len) + " runs past the end of the file (" +
               std::to_string(npy.size()) + " bytes)");
  std::string_view dict = npy.substr(prefix, len);
  if (dict.empty() || dict.back() != '\n') return bad("the header does not end with '\\n'");
  dict.remove_suffix(1);
  NpyHeader h;
  TETHER_RETURN_IF_ERROR(ParseNpyDict(dict, &h));
  h.data_offset = prefix + len;
  return h;
}

namespace {

struct ZipDiscard {
  void operator()(zip_t* z) const { zip_discard(z); }
};
struct ZipFileClose {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};
using Archive = std::unique_ptr<zip_t, ZipDiscard>;

// One member of the archive as its central directory states it.
struct Member {
  zip_uint64_t index = 0;
  std::string name;
  uint64_t size = 0;       // uncompressed, as claimed
  uint64_t comp_size = 0;  // in the file
};

// The archive in `file`'s bytes (which must outlive it), read-only.
StatusOr<Archive> OpenArchive(const std::string& path, const std::string& file) {
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* src = zip_source_buffer_create(file.data(), file.size(), 0, &err);
  zip_t* z = src == nullptr ? nullptr : zip_open_from_source(src, ZIP_RDONLY, &err);
  if (z == nullptr) {
    if (src != nullptr) zip_source_free(src);
    Status st = Status::DataLoss(path + ": not a zip archive libzip can read (" + zip_error_strerror(&err) + ")");
    zip_error_fini(&err);
    return st;
  }
  zip_error_fini(&err);
  return Archive(z);
}

// A member's claims that no honest archive makes: another name than
// NAME.npy, encryption, a method other than stored or deflate, an
// uncompressed size its compressed bytes cannot hold.
Status CheckMember(const std::string& path, const zip_stat_t& st, uint64_t file_size) {
  const std::string name = st.name;
  const auto bad = [&](const std::string& what) { return Status::DataLoss(path + ": member '" + name + "': " + what); };
  const size_t n = std::strlen(kNpySuffix);
  if (name.size() <= n || name.compare(name.size() - n, n, kNpySuffix) != 0)
    return bad("not an .npy file (an npz model file holds only NAME.npy members)");
  if (st.encryption_method != ZIP_EM_NONE) return bad("encrypted (a model file is not)");
  if (st.comp_size > file_size)
    return bad("claims " + std::to_string(st.comp_size) + " compressed bytes in a file of " +
               std::to_string(file_size));
  if (st.comp_method == ZIP_CM_STORE) {
    if (st.size != st.comp_size)
      return bad("stored, but claims " + std::to_string(st.size) + " bytes uncompressed and " +
                 std::to_string(st.comp_size) + " compressed");
  } else if (st.comp_method == ZIP_CM_DEFLATE) {
    if (st.size > st.comp_size * kMaxDeflateRatio)
      return bad("claims " + std::to_string(st.size) + " bytes uncompressed, more than deflate's largest ratio (" +
                 std::to_string(kMaxDeflateRatio) + ":1) makes of its " + std::to_string(st.comp_size) +
                 " compressed bytes");
  } else {
    return bad("compression method " + std::to_string(st.comp_method) +
               " (only stored, 0, and deflate, 8, are read: what numpy.savez and numpy.savez_compressed write)");
  }
  return Status::OK();
}

// The members as the central directory lists them, each checked, names
// unique, their compressed bytes within the file.
StatusOr<std::vector<Member>> ListMembers(const std::string& path, zip_t* z, uint64_t file_size) {
  const zip_int64_t n = zip_get_num_entries(z, 0);
  std::vector<Member> out;
  std::set<std::string> names;
  uint64_t comp_total = 0;
  constexpr zip_uint64_t kNeeded =
      ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(z, static_cast<zip_uint64_t>(i), 0, &st) != 0 || (st.valid & kNeeded) != kNeeded)
      return Status::DataLoss(path + ": member " + std::to_string(i) + " of the archive: " + zip_strerror(z));
    TETHER_RETURN_IF_ERROR(CheckMember(path, st, file_size));
    if (!names.insert(st.name).second)
      return Status::DataLoss(path + ": member '" + std::string(st.name) + "' appears twice in the archive");
    comp_total += st.comp_size;
    if (comp_total > file_size)
      return Status::DataLoss(path + ": member '" + std::string(st.name) + "': the members' compressed bytes add up "
                              "to more than the file's " + std::to_string(file_size) + " (members overlap)");
    out.push_back({static_cast<zip_uint64_t>(i), st.name, st.size, st.comp_size});
  }
  return out;
}

// The members' bytes, held with the file's and copied once more into the
// model, must fit the process's memory: checked before any is inflated.
Status CheckMembersFit(const std::string& path, const std::vector<Member>& members, uint64_t file_size) {
  uint64_t total = 0;
  // No overflow: each size is at most 1032 times its compressed bytes,
  // which add up to at most the file's (ListMembers).
  for (const Member& m : members) total += m.size;
  const uint64_t need = file_size + 2 * total;
  const MemoryBudget budget = MemoryBudgetFor(JobConfig{});
  if (budget.bytes == 0 || need <= budget.bytes) return Status::OK();
  return Status::ResourceExhausted(path + ": its members hold " + FormatBytes(total) +
                                   " uncompressed; read with the file and copied into the model that is " +
                                   FormatBytes(need) + ", more than the " + FormatBytes(budget.bytes) +
                                   " this process may use (" + budget.source + ")");
}

// Member `m`'s bytes: exactly as many as it claims (fewer or more, or a
// failed CRC, is refused).
StatusOr<std::string> ReadMember(const std::string& path, zip_t* z, const Member& m) {
  const auto bad = [&](const std::string& what) { return Status::DataLoss(path + ": member '" + m.name + "': " + what); };
  std::unique_ptr<zip_file_t, ZipFileClose> f(zip_fopen_index(z, m.index, 0));
  if (f == nullptr) return bad(std::string("cannot be read: ") + zip_strerror(z));
  std::string out(m.size, '\0');
  uint64_t got = 0;
  while (got < m.size) {
    const zip_int64_t r = zip_fread(f.get(), &out[got], m.size - got);
    if (r < 0) return bad(zip_file_strerror(f.get()));
    if (r == 0) break;
    got += static_cast<uint64_t>(r);
  }
  if (got < m.size)
    return bad("holds " + std::to_string(got) + " bytes, fewer than the " + std::to_string(m.size) + " it claims");
  // One more read reaches the end of the stream, where libzip checks the CRC.
  char extra = 0;
  const zip_int64_t r = zip_fread(f.get(), &extra, 1);
  if (r < 0) return bad(zip_file_strerror(f.get()));
  if (r > 0) return bad("inflates to more than the " + std::to_string(m.size) + " bytes it claims");
  return out;
}

StatusOr<DType> DTypeOfDescr(const std::string& descr) {
  for (DType t : {DType::kF32, DType::kU64, DType::kI64, DType::kU8})
    if (descr == NpyDescr(t)) return t;
  return Status::DataLoss("dtype '" + descr + "' is not one of <f4, <u8, <i8, |u1 (little-endian)");
}

// The metadata member: a '|u1' vector holding a JSON object of strings.
Status ParseMetadata(const TensorView& v, std::map<std::string, std::string>* meta) {
  if (v.dtype != DType::kU8 || v.shape.size() != 1) return Status::DataLoss("expected dtype |u1 of rank 1");
  const nlohmann::json j = nlohmann::json::parse(v.data, v.data + v.bytes, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Status::DataLoss("not a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_string()) return Status::DataLoss("metadata '" + it.key() + "' is not a string");
    (*meta)[it.key()] = it.value().get<std::string>();
  }
  return Status::OK();
}

// Member `name`'s NPY bytes as a tensor of `mt` (or its metadata); the
// view borrows `bytes`.
Status AddMember(const std::string& name, const std::string& bytes, ModelTensors* mt) {
  TETHER_ASSIGN_OR_RETURN(const NpyHeader h, ParseNpyHeader(bytes));
  TensorView v;
  TETHER_ASSIGN_OR_RETURN(v.dtype, DTypeOfDescr(h.descr));
  v.shape = h.shape;
  uint64_t count = 0;
  if (!ElementCount(v.shape, &count)) return Status::DataLoss("NPY: shape overflows");
  v.bytes = count * ItemBytes(v.dtype);
  if (bytes.size() - h.data_offset != v.bytes)
    return Status::DataLoss("NPY: " + std::to_string(bytes.size() - h.data_offset) + " bytes of data, but dtype '" +
                            h.descr + "' x shape is " + std::to_string(v.bytes) + " bytes");
  v.data = bytes.data() + h.data_offset;
  const std::string stem = name.substr(0, name.size() - std::strlen(kNpySuffix));
  if (stem == kMetadataKey) return ParseMetadata(v, &mt->meta);
  mt->tensors[stem] = std::move(v);
  return Status::OK();
}

}  // namespace

StatusOr<ModelFileContents> ParseNpzModel(const std::string& path, const std::string& file) {
  TETHER_ASSIGN_OR_RETURN(Archive z, OpenArchive(path, file));
  TETHER_ASSIGN_OR_RETURN(const std::vector<Member> members, ListMembers(path, z.get(), file.size()));
  const std::string meta_name = std::string(kMetadataKey) + kNpySuffix;
  bool has_meta = false;
  for (const Member& m : members) has_meta = has_meta || m.name == meta_name;
  if (!has_meta)
    return Status::InvalidArgument(path + ": no member '" + meta_name +
                                   "': an npz without a Tether model's metadata (not a Tether model file)");
  TETHER_RETURN_IF_ERROR(CheckMembersFit(path, members, file.size()));
  ModelTensors mt;
  mt.format = ModelFileFormat::kNpz;
  std::deque<std::string> held;  // the views in mt point into these
  for (const Member& m : members) {
    TETHER_ASSIGN_OR_RETURN(std::string bytes, ReadMember(path, z.get(), m));
    held.push_back(std::move(bytes));
    TETHER_RETURN_IF_ERROR(AddMember(m.name, held.back(), &mt).WithPrefix(path + ": member '" + m.name + "'"));
  }
  return model_file_internal::ModelOfTensors(path, mt);
}

}  // namespace tether
