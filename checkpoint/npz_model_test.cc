// The npz model reader: NPY headers are parsed strictly (numpy's own forms
// read, anything else refused saying what and where); an npz reads back
// bit for bit whether its members are stored or deflated, and equals the
// safetensors file of the same model; hostile archives (huge shapes,
// duplicate or foreign members, sizes that lie, a bad CRC, a wrong dtype,
// no metadata, a truncated file) are refused naming the file and the member.
#include "checkpoint/npz_model.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zip.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "checkpoint/model_file.h"
#include "tests/testing/file_bytes.h"

namespace tether {
namespace {

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/npz_model_test_" + std::to_string(getpid()) + "_" + name;
}

std::string ReadAll(const std::string& path) { return testing::ReadFileBytes(path); }
void WriteAll(const std::string& path, const std::string& bytes) { testing::WriteFileBytes(path, bytes); }

// An NPY file: version `major`.0, `dict` as the header (padded, '\n'), then `data`.
std::string Npy(const std::string& dict, const std::string& data = "", int major = 1) {
  std::string h = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  h.append((64 - (prefix + h.size() + 1) % 64) % 64, ' ');
  h += '\n';
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  for (size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>((h.size() >> (8 * i)) & 0xff);
  return out + h + data;
}

std::string Message(const StatusOr<NpyHeader>& h) { return h.ok() ? "OK" : h.status().message(); }

TEST(NpyHeaderTest, ReadsNumpysOwnForms) {
  StatusOr<NpyHeader> h = ParseNpyHeader(Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }"));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->descr, "<f4");
  EXPECT_EQ(h->shape, (std::vector<uint64_t>{3, 4}));
  EXPECT_EQ(h->data_offset, 128u);  // 10 + the dict, padded with spaces to a multiple of 64
  h = ParseNpyHeader(Npy("{\"shape\": (7,), \"descr\": \"|u1\", \"fortran_order\": False}", "", 2));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->descr, "|u1");
  EXPECT_EQ(h->shape, (std::vector<uint64_t>{7}));
  EXPECT_EQ(h->data_offset, 128u);
  h = ParseNpyHeader(Npy("{'descr': '<u8', 'fortran_order': False, 'shape': (), }"));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_TRUE(h->shape.empty());
  h = ParseNpyHeader(Npy("{'descr':'<i8','fortran_order':False,'shape':(0,18446744073709551615)}"));
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->shape, (std::vector<uint64_t>{0, std::numeric_limits<uint64_t>::max()}));
}

TEST(NpyHeaderTest, RefusesAnythingElseSayingWhat) {
  const auto dict = [](const std::string& shape, const std::string& rest = "") {
    return Npy("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", " + rest + "}");
  };
  EXPECT_EQ(Message(ParseNpyHeader("PK\x03\x04....")), "NPY: not an NPY file (it does not start with \\x93NUMPY)");
  std::string v3 = Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "", 2);
  v3[6] = 3;
  EXPECT_EQ(Message(ParseNpyHeader(v3)), "NPY: format version 3.0 is not read (1.0 and 2.0 are)");
  std::string past = dict("(1,)");
  past[8] = '\xff';
  EXPECT_EQ(Message(ParseNpyHeader(past)), "NPY: header length 255 runs past the end of the file (128 bytes)");
  std::string huge = dict("(1,)");
  huge[8] = '\x11';
  huge[9] = '\x27';  // 10001
  EXPECT_EQ(Message(ParseNpyHeader(huge)), "NPY: header length 10001 is above the 10000-byte limit numpy.load keeps");
  std::string no_newline = dict("(1,)");
  no_newline.back() = ' ';
  EXPECT_EQ(Message(ParseNpyHeader(no_newline)), "NPY: the header does not end with '\\n'");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {Npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }"),
       "'fortran_order' is True: only C-order arrays are read"},
      {dict("(3)"), "'(n)' is no tuple: a shape of one dimension is written '(n,)'"},
      {dict("(3, -1)"), "expected a non-negative integer"},
      {dict("(03,)"), "a dimension with a leading zero"},
      {dict("(18446744073709551616,)"), "a dimension above 2^64 - 1"},
      {dict("(1,)", "'extra': 1, "), "unknown key 'extra'"},
      {dict("(1,)", "'shape': (1,), "), "key 'shape' given twice"},
      {Npy("{'descr': '<f4', 'fortran_order': False, }"), "no key 'shape'"},
      {Npy("{'descr': '<f\\x34', 'fortran_order': False, 'shape': (1,), }"), "a string holds an escape"},
      {Npy("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }"), "expected True or False"},
      {Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x"), "bytes after the dict"},
      {Npy("['descr', '<f4']"), "expected '{'"},
  };
  for (const auto& [bytes, needle] : bad) {
    const std::string m = Message(ParseNpyHeader(bytes));
    EXPECT_EQ(m.rfind("NPY header: " + needle, 0), 0u) << m;
  }
}

// ------------------------------------------------------------ whole files

// XMC-shaped: w1 (row, dim 3), b1 (dense, 3), w2 (row, dim 2); values
// include the largest float, -0 and a denormal.
TrainedModel SmallModel() {
  TrainedModel m;
  m.config.set_name("small");
  m.config.mutable_data()->set_num_features(10);
  m.config.mutable_data()->set_num_labels(2);
  m.config.mutable_model()->set_hidden(3);
  m.job_id = "small-job";
  m.generation = 1;
  m.clock = 9;
  auto table = [](uint32_t id, const std::string& name, bool row, uint32_t width) {
    TrainedTable t;
    t.spec.set_id(id);
    t.spec.set_name(name);
    t.spec.set_kind(row ? TableSpec::ROW : TableSpec::DENSE);
    row ? t.spec.set_dim(width) : t.spec.set_size(width);
    return t;
  };
  TrainedTable w1 = table(0, "w1", true, 3);
  w1.keys = {2, 5, 9};
  w1.values = {1.5f, -0.0f, std::numeric_limits<float>::denorm_min(), 3, std::numeric_limits<float>::max(), 5,
               6, 7, 8};
  TrainedTable b1 = table(1, "b1", false, 3);
  b1.values = {0.5f, -0.5f, 1e-30f};
  TrainedTable w2 = table(2, "w2", true, 2);
  w2.keys = {0, 1};
  w2.values = {1, 2, 3, 4};
  m.tables = {w1, b1, w2};
  return m;
}

LabelCounts SmallCounts() {
  LabelCounts c;
  c.counts = {3, 11};
  c.num_rows = 12;
  return c;
}

void ExpectSameContents(const ModelFileContents& a, const ModelFileContents& b) {
  EXPECT_EQ(a.model.config.SerializeAsString(), b.model.config.SerializeAsString());
  EXPECT_EQ(a.model.job_id, b.model.job_id);
  EXPECT_EQ(a.model.generation, b.model.generation);
  EXPECT_EQ(a.model.clock, b.model.clock);
  ASSERT_EQ(a.model.tables.size(), b.model.tables.size());
  for (size_t i = 0; i < a.model.tables.size(); ++i) {
    const TrainedTable &x = a.model.tables[i], &y = b.model.tables[i];
    EXPECT_EQ(x.spec.SerializeAsString(), y.spec.SerializeAsString()) << i;
    EXPECT_EQ(x.keys, y.keys) << i;
    ASSERT_EQ(x.values.size(), y.values.size()) << i;
    EXPECT_EQ(std::memcmp(x.values.data(), y.values.data(), x.values.size() * sizeof(float)), 0) << i;
  }
  EXPECT_EQ(a.label_counts.counts, b.label_counts.counts);
  EXPECT_EQ(a.label_counts.num_rows, b.label_counts.num_rows);
  EXPECT_EQ(a.metadata, b.metadata);
}

// The archive's members as (name, NPY bytes), in order.
std::vector<std::pair<std::string, std::string>> Members(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_RDONLY, &err);
  if (z == nullptr) return out;
  for (zip_int64_t i = 0; i < zip_get_num_entries(z, 0); ++i) {
    zip_stat_t st;
    zip_stat_index(z, i, 0, &st);
    std::string bytes(st.size, '\0');
    zip_file_t* f = zip_fopen_index(z, i, 0);
    zip_fread(f, &bytes[0], st.size);
    zip_fclose(f);
    out.push_back({st.name, bytes});
  }
  zip_discard(z);
  return out;
}

// Writes an archive of `members` to `path`, each compressed with `method`.
void WriteZip(const std::string& path, const std::vector<std::pair<std::string, std::string>>& members,
              zip_int32_t method) {
  std::remove(path.c_str());
  int err = 0;
  zip_t* z = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  ASSERT_NE(z, nullptr);
  for (const auto& [name, bytes] : members) {
    zip_source_t* src = zip_source_buffer(z, bytes.data(), bytes.size(), 0);
    const zip_int64_t idx = zip_file_add(z, name.c_str(), src, ZIP_FL_ENC_UTF_8);
    ASSERT_GE(idx, 0) << name;
    ASSERT_EQ(zip_set_file_compression(z, idx, method, 0), 0);
  }
  ASSERT_EQ(zip_close(z), 0);
}

TEST(NpzModelTest, StoredAndDeflatedReadBackBitForBitAsTheSafetensorsFileDoes) {
  const std::string npz = TempPath("rt.npz"), st = TempPath("rt.safetensors"), deflated = TempPath("d.npz");
  ASSERT_TRUE(WriteModelFile(SmallModel(), SmallCounts(), npz, ModelFileFormat::kNpz).ok());
  ASSERT_TRUE(WriteModelFile(SmallModel(), SmallCounts(), st, ModelFileFormat::kSafetensors).ok());
  const StatusOr<ModelFileContents> a = ReadModelFile(npz), b = ReadModelFile(st);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  ExpectSameContents(*a, *b);
  EXPECT_EQ(a->metadata, ModelFileMetadata(SmallModel(), SmallCounts()));
  EXPECT_EQ(a->model.tables[0].values[4], std::numeric_limits<float>::max());
  // numpy.savez_compressed's form: the same NPY files, deflated.
  WriteZip(deflated, Members(npz), ZIP_CM_DEFLATE);
  ASSERT_LT(ReadAll(deflated).size(), ReadAll(npz).size());
  const StatusOr<ModelFileContents> c = ReadModelFile(deflated);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ExpectSameContents(*c, *b);
  // Content decides, not the name.
  const std::string misnamed = TempPath("npz.safetensors");
  WriteAll(misnamed, ReadAll(npz));
  ASSERT_TRUE(ReadModelFile(misnamed).ok());
  for (const std::string& p : {npz, st, deflated, misnamed}) std::remove(p.c_str());
}

// A FIFO that no process writes named .npz: refused at once, naming it,
// never handed to libzip (which reads the bytes read from the checked
// descriptor, never the name).
TEST(NpzModelTest, AFifoNamedNpzIsRefusedAtOnce) {
  const std::string fifo = TempPath("fifo.npz");
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  const StatusOr<ModelFileContents> r = ReadModelFile(fifo);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(r.status().message(), fifo + ": is a FIFO (named pipe), not a regular file");
  std::remove(fifo.c_str());
}

// The `width`-byte field at `offset` of member `name`'s central directory
// entry, and at `local_offset` of its local header when that is >= 0.
void Patch(std::string* zip, const std::string& name, size_t offset, int local_offset, uint32_t value,
           size_t width = 4) {
  for (const bool central : {true, false}) {
    if (!central && local_offset < 0) continue;
    const std::string sig = central ? std::string("PK\x01\x02") : std::string("PK\x03\x04");
    const size_t name_at = central ? 46 : 30, field = central ? offset : static_cast<size_t>(local_offset);
    for (size_t at = zip->find(sig); at != std::string::npos; at = zip->find(sig, at + 4))
      if (zip->compare(at + name_at, name.size(), name) == 0) std::memcpy(&(*zip)[at + field], &value, width);
  }
}

// The 4-byte field at `offset` of member `name`'s central directory entry.
uint32_t CentralField(const std::string& zip, const std::string& name, size_t offset) {
  for (size_t at = zip.find("PK\x01\x02"); at != std::string::npos; at = zip.find("PK\x01\x02", at + 4)) {
    if (zip.compare(at + 46, name.size(), name) != 0) continue;
    uint32_t v = 0;
    std::memcpy(&v, &zip[at + offset], 4);
    return v;
  }
  return 0;
}

class HostileNpzTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteModelFile(SmallModel(), SmallCounts(), good_, ModelFileFormat::kNpz).ok());
    members_ = Members(good_);
    ASSERT_EQ(members_.size(), 7u);  // 5 tensors, label_counts, metadata
  }
  void TearDown() override {
    std::remove(good_.c_str());
    std::remove(path_.c_str());
  }
  // The members with `name`'s bytes replaced (dropped when `bytes` is "-").
  std::vector<std::pair<std::string, std::string>> With(const std::string& name, const std::string& bytes) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& m : members_)
      if (m.first != name) out.push_back(m);
      else if (bytes != "-") out.push_back({name, bytes});
    return out;
  }
  // Reading `bytes` as path_ is refused with a message that is path_ + ": " + `rest`.
  void ExpectRefused(const std::string& bytes, const std::string& rest, Status::Code code = Status::Code::kDataLoss) {
    WriteAll(path_, bytes);
    const StatusOr<ModelFileContents> r = ReadModelFile(path_);
    ASSERT_FALSE(r.ok()) << rest;
    EXPECT_EQ(r.status().message(), path_ + ": " + rest);
    EXPECT_EQ(r.status().code(), code) << r.status().ToString();
  }
  std::string Zip(const std::vector<std::pair<std::string, std::string>>& members, zip_int32_t method) {
    const std::string tmp = TempPath("build.zip");
    WriteZip(tmp, members, method);
    std::string bytes = ReadAll(tmp);
    std::remove(tmp.c_str());
    return bytes;
  }

  const std::string good_ = TempPath("good.npz");
  const std::string path_ = TempPath("hostile.npz");
  std::vector<std::pair<std::string, std::string>> members_;
};

TEST_F(HostileNpzTest, HugeDeclaredShapesAreRefusedBeforeAllocating) {
  ExpectRefused(Zip(With("w1.npy", Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 3), }",
                                       std::string(36, '\0'))), ZIP_CM_STORE),
                "member 'w1.npy': NPY: 36 bytes of data, but dtype '<f4' x shape is 13194139533312 bytes");
  ExpectRefused(Zip(With("w1.npy", Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, "
                                       "4611686018427387904), }")), ZIP_CM_STORE),
                "member 'w1.npy': NPY: shape overflows");
}

TEST_F(HostileNpzTest, ForeignDuplicateAndMissingMembersAreRefused) {
  // Same-length names: w2 renamed w1 in both headers.
  std::string dup = Zip(members_, ZIP_CM_STORE);
  for (size_t at = dup.find("w2.npy"); at != std::string::npos; at = dup.find("w2.npy", at + 1)) dup[at + 1] = '1';
  ExpectRefused(dup, "member 'w1.npy' appears twice in the archive");
  auto extra = members_;
  extra.push_back({"README.txt", "hello"});
  ExpectRefused(Zip(extra, ZIP_CM_STORE),
                "member 'README.txt': not an .npy file (an npz model file holds only NAME.npy members)");
  ExpectRefused(Zip(With("__metadata__.npy", "-"), ZIP_CM_STORE),
                "no member '__metadata__.npy': an npz without a Tether model's metadata (not a Tether model file)",
                Status::Code::kInvalidArgument);
  ExpectRefused(Zip(With("b1.npy", "-"), ZIP_CM_STORE), "member 'b1.npy' is missing",
                Status::Code::kInvalidArgument);
  ExpectRefused(Zip(With("__metadata__.npy", Npy("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", "[]")),
                    ZIP_CM_STORE),
                "member '__metadata__.npy': not a JSON object");
}

TEST_F(HostileNpzTest, WrongDtypesAndNonFiniteWeightsAreRefused) {
  ExpectRefused(Zip(With("b1.npy", Npy("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }",
                                       std::string(24, '\0'))), ZIP_CM_STORE),
                "member 'b1.npy': dtype '<f8' is not one of <f4, <u8, <i8, |u1 (little-endian)");
  ExpectRefused(Zip(With("b1.npy", Npy("{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }",
                                       std::string(12, '\0'))), ZIP_CM_STORE),
                "member 'b1.npy': dtype '>f4' is not one of <f4, <u8, <i8, |u1 (little-endian)");
  ExpectRefused(Zip(With("w2.npy", Npy("{'descr': '<u8', 'fortran_order': False, 'shape': (2, 2), }",
                                       std::string(32, '\0'))), ZIP_CM_STORE),
                "member 'w2.npy': expected dtype <f4 of rank 2");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::string b1(12, '\0');
  std::memcpy(&b1[8], &nan, 4);
  ExpectRefused(Zip(With("b1.npy", Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", b1)),
                    ZIP_CM_DEFLATE),
                "member 'b1.npy' holds NaN at index 2: a model's weights must be finite");
}

TEST_F(HostileNpzTest, SizesThatLieAndDamagedBytesAreRefused) {
  const std::string deflated = Zip(members_, ZIP_CM_DEFLATE);
  const uint32_t real = static_cast<uint32_t>(members_[0].second.size());  // w1.keys.npy
  const std::string w1k = members_[0].first;
  ASSERT_EQ(w1k, "w1.keys.npy");
  std::string bigger = deflated;  // inflates to more than it claims
  Patch(&bigger, w1k, 24, 22, real - 8);
  ExpectRefused(bigger, "member 'w1.keys.npy': inflates to more than the " + std::to_string(real - 8) +
                            " bytes it claims");
  std::string smaller = deflated;  // claims more than it inflates to
  Patch(&smaller, w1k, 24, 22, real + 8);
  ExpectRefused(smaller, "member 'w1.keys.npy': holds " + std::to_string(real) + " bytes, fewer than the " +
                             std::to_string(real + 8) + " it claims");
  std::string bomb = deflated;  // past deflate's ratio: refused before inflating
  Patch(&bomb, w1k, 24, -1, 0xfffffff0u);
  ExpectRefused(bomb, "member 'w1.keys.npy': claims 4294967280 bytes uncompressed, more than deflate's largest "
                      "ratio (1032:1) makes of its " + std::to_string(CentralField(deflated, w1k, 20)) +
                      " compressed bytes");
  std::string stored = Zip(members_, ZIP_CM_STORE);
  std::string method = stored;
  Patch(&method, w1k, 10, -1, 12, 2);  // bzip2
  ExpectRefused(method, "member 'w1.keys.npy': compression method 12 (only stored, 0, and deflate, 8, are read: what "
                        "numpy.savez and numpy.savez_compressed write)");
  std::string lying_store = stored;
  Patch(&lying_store, w1k, 24, -1, 1u << 30);
  ExpectRefused(lying_store, "member 'w1.keys.npy': stored, but claims 1073741824 bytes uncompressed and " +
                                 std::to_string(real) + " compressed");
  std::string crc = stored;  // one weight's bytes changed: its CRC no longer holds
  const size_t at = crc.find(members_[4].second);  // w2.npy, stored verbatim
  ASSERT_NE(at, std::string::npos);
  crc[at + members_[4].second.size() - 1] ^= 0x01;
  ExpectRefused(crc, "member 'w2.npy': CRC error");
  ExpectRefused(stored.substr(0, stored.size() / 2), "not a zip archive libzip can read (Not a zip archive)");
  WriteAll(path_, "not a zip");
  const StatusOr<ModelFileContents> r = ReadModelFile(path_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), path_ + ": named .npz but not a zip archive (an npz starts with the bytes "
                                          "PK\\x03\\x04)");
}

// VmSize of this process in bytes (0 when unknown).
uint64_t VmSizeBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7)) * 1024;
  return 0;
}

// The members' claimed sizes are checked against the process's memory
// before any is inflated: in a child under an address-space limit, an
// archive whose one deflated member claims 1000 times its bytes (within
// deflate's ratio, so not refused as a lie) is refused as too large.
TEST_F(HostileNpzTest, MembersLargerThanTheProcessMayUseAreRefusedBeforeInflating) {
  std::string noise(1 << 20, '\0');
  uint64_t x = 88172645463325252ull;
  for (char& c : noise) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x);
  }
  auto members = members_;
  members.push_back({"noise.npy", Npy("{'descr': '|u1', 'fortran_order': False, 'shape': (1048576,), }", noise)});
  std::string zip = Zip(members, ZIP_CM_DEFLATE);
  const uint32_t comp = CentralField(zip, "noise.npy", 20);
  ASSERT_GT(comp, 1000000u);
  Patch(&zip, "noise.npy", 24, 22, comp * 1000);
  WriteAll(path_, zip);
  const uint64_t vm = VmSizeBytes();
  ASSERT_GT(vm, 0u);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    const rlimit limit{vm + (256ull << 20), vm + (256ull << 20)};
    setrlimit(RLIMIT_AS, &limit);
    const StatusOr<ModelFileContents> r = ReadModelFile(path_);
    const std::string m = r.ok() ? "read" : r.status().ToString();
    (void)!write(fds[1], m.data(), m.size());
    _exit(0);
  }
  close(fds[1]);
  std::string said;
  char buf[512];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) said.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_EQ(said.rfind("ResourceExhausted: " + path_ + ": its members hold ", 0), 0u) << said;
  EXPECT_NE(said.find("this process may use (the address-space limit (RLIMIT_AS, ulimit -v))"), std::string::npos)
      << said;
}

}  // namespace
}  // namespace tether
