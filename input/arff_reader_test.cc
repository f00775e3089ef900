// Tests for the MULAN ARFF reader and the writers of tether-data convert.
// Run from the repository root (ctest does): the bundled Bibtex files live in
// data/bibtex/.
#include "input/arff_reader.h"

#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "input/data_writer.h"
#include "input/reader.h"
#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

const std::string kArff = "data/bibtex/bibtex.arff.gz";
const std::string kXml = "data/bibtex/bibtex.xml";
const std::string kXmc = "data/bibtex/Bibtex_data.txt.gz";

ReadOptions Arff(const std::string& xml = "", int64_t num_labels = 0) {
  ReadOptions o;
  o.format = DataFormat::kArff;
  o.label_xml = xml;
  o.num_labels = num_labels;
  return o;
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

void ExpectSameCsr(const CsrMatrix& a, const CsrMatrix& b) {
  EXPECT_EQ(a.rows, b.rows);
  EXPECT_EQ(a.cols, b.cols);
  EXPECT_EQ(a.row_ptr, b.row_ptr);
  EXPECT_EQ(a.col_idx, b.col_idx);
  EXPECT_EQ(a.values, b.values);  // exact float equality
}

// A small MULAN file: 2 numeric features, 1 binary nominal feature, 2 labels
// (one named with a space), sparse and dense rows, comments, CRLF.
const char kSmall[] =
    "% a comment\r\n"
    "@RELATION small\r\n"
    "@attribute f0 numeric\n"
    "@attribute 'f 1' REAL\n"
    "@attribute bin {0,1}\n"
    "@attribute 'tag a' {0,1}\n"
    "@attribute tagb {0,1}\n"
    "\n"
    "@data\n"
    "{0 1.5,3 1}\n"
    "0,2.25,1,0,1\n"
    "% rows may be interleaved with comments\n"
    "{}\n"
    "{1 -3,2 1,3 1,4 1}\n";
const char kSmallXml[] =
    "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
    "<labels xmlns=\"http://mulan.sourceforge.net/labels\">\n"
    "<!-- <label name=\"commented\"/> -->\n"
    "<label name=\"tag a\"><label name=\"tagb\"/></label>\n"
    "</labels>\n";

class ArffSmall : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteText(arff_, kSmall);
    WriteText(xml_, kSmallXml);
  }
  testing::ScopedTempDir dir_;
  std::string arff_ = dir_.File("small.arff");
  std::string xml_ = dir_.File("small.xml");
};

TEST_F(ArffSmall, ReadsSparseAndDenseRowsExactly) {
  StatusOr<Dataset> ds = ReadDataset(arff_, Arff(xml_));
  ASSERT_TRUE(ds.ok()) << ds.status().message();
  EXPECT_EQ(ds->features.rows, 4);
  EXPECT_EQ(ds->features.cols, 3);
  EXPECT_EQ(ds->labels.cols, 2);
  EXPECT_EQ(ds->features.row_ptr, (std::vector<int64_t>{0, 1, 3, 3, 5}));
  EXPECT_EQ(ds->features.col_idx, (std::vector<uint32_t>{0, 1, 2, 1, 2}));
  EXPECT_EQ(ds->features.values, (std::vector<float>{1.5f, 2.25f, 1.0f, -3.0f, 1.0f}));
  EXPECT_EQ(ds->labels.row_ptr, (std::vector<int64_t>{0, 1, 2, 2, 4}));
  EXPECT_EQ(ds->labels.col_idx, (std::vector<uint32_t>{0, 1, 0, 1}));
  EXPECT_EQ(ds->source_lines, (std::vector<int64_t>{10, 11, 13, 14}));
  EXPECT_EQ(ds->unlabeled_rows, 1);
  EXPECT_EQ(ds->feature_names, (std::vector<std::string>{"f0", "f 1", "bin"}));
  EXPECT_EQ(ds->label_names, (std::vector<std::string>{"tag a", "tagb"}));
  // Without the XML, the last two attributes are the labels: the same data.
  StatusOr<Dataset> by_count = ReadDataset(arff_, Arff("", 2));
  ASSERT_TRUE(by_count.ok()) << by_count.status().message();
  ExpectSameCsr(by_count->features, ds->features);
  ExpectSameCsr(by_count->labels, ds->labels);
}

TEST_F(ArffSmall, PartitionsHoldEveryRowOnce) {
  for (int n : {2, 3, 4, 5}) {
    std::vector<int64_t> lines;
    for (int p = 0; p < n; ++p) {
      ReadOptions o = Arff(xml_);
      o.partition = p;
      o.num_partitions = n;
      StatusOr<Dataset> ds = ReadDataset(arff_, o);
      ASSERT_TRUE(ds.ok()) << ds.status().message();
      lines.insert(lines.end(), ds->source_lines.begin(), ds->source_lines.end());
    }
    EXPECT_EQ(lines, (std::vector<int64_t>{10, 11, 13, 14})) << n << " partitions";
  }
  const std::vector<int64_t> subset{1, 3};
  ReadOptions o = Arff(xml_);
  o.row_subset = &subset;
  StatusOr<Dataset> ds = ReadDataset(arff_, o);
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ(ds->source_lines, (std::vector<int64_t>{11, 14}));
}

// Each malformed input: the exact message, naming file:line.
TEST_F(ArffSmall, ErrorsNameFileAndLine) {
  const std::string bad = dir_.File("bad.arff");
  const std::string header =
      "@relation r\n@attribute a numeric\n@attribute b {1,2}\n@attribute tag {0,1}\n@data\n";
  struct Case {
    std::string text;
    std::string want;
  } cases[] = {
      {header + "{0 1,7 1}\n", bad + ":6: attribute index 7 is out of range (entry '7 1'): the header declares 3 "
                                    "attributes, indices 0..2"},
      {header + "{0 1,2 2}\n", bad + ":6: label 'tag' has the value '2': a label's value must be 0 or 1"},
      {header + "1,2\n", bad + ":6: dense row has 2 values but the header declares 3 attributes"},
      {header + "1,z,0\n", bad + ":6: value 'z' is not one of attribute 'b''s values {1,2}"},
      {header + "?,1,0\n", bad + ":6: missing value '?' for attribute 'a': missing values are not supported"},
      {header + "{0 abc}\n", bad + ":6: invalid value 'abc' for numeric attribute 'a': expected a number"},
      {header + "{0 1},{3}\n", bad + ":6: instance weight ',{3}' after the row: weighted instances are not supported"},
      {header + "{0 1\n", bad + ":6: sparse row without its closing '}'"},
      {header + "{0 nan}\n", bad + ":6: non-finite value: attribute 'a' value 'nan' is NaN; to drop such rows "
                                   "instead, set data.non_finite: NON_FINITE_DROP_ROW (tether-data: "
                                   "--non_finite=drop_row)"},
      {"@relation r\n@attribute a numeric\n@attribute tag {0,1}\n{0 1}\n",
       bad + ":4: expected @relation, @attribute or @data, got '{0 1}'"},
      {"@relation r\n@attribute a numeric\n@attribute tag {0,1}\n",
       bad + ": missing @data: the file ends at line 3 without the @data line that starts the rows"},
      {"@relation r\n@attribute s string\n@attribute tag {0,1}\n@data\n",
       bad + ":2: attribute 's' has type 'string', which Tether does not read (numeric, real, integer or a "
             "nominal {...} list)"},
      {"@relation r\n@attribute b {x,y}\n@attribute tag {0,1}\n@data\n",
       bad + ":2: nominal attribute 'b' has the value 'x', not a number: Tether reads nominal features only when "
             "their values are numbers, such as {0,1} (one-hot encode the others)"},
      {"@relation r\n@attribute a numeric\n@attribute tag {0,1,2}\n@data\n",
       bad + ":3: label attribute 'tag' must be nominal {0,1}"},
      {"@relation r\n@attribute a numeric\n@attribute tag {0,1}\n@data\n",
       bad + ": no examples found (no rows after @data on line 4)"},
  };
  for (const Case& c : cases) {
    WriteText(bad, c.text);
    StatusOr<Dataset> ds = ReadDataset(bad, Arff("", 1));
    ASSERT_FALSE(ds.ok()) << c.text;
    EXPECT_EQ(ds.status().message(), c.want);
  }
  // The label XML names an attribute the ARFF file does not have.
  const std::string xml = dir_.File("bad.xml");
  WriteText(xml, "<labels>\n<label name=\"tag a\"/>\n<label name=\"nope\"/>\n</labels>\n");
  StatusOr<Dataset> ds = ReadDataset(arff_, Arff(xml));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(), xml + ":3: label 'nope' is not an attribute of " + arff_ + " (unknown attribute)");
  WriteText(xml, "<labels>\n<label name=\"tag a\"/>\n<label name=\"tag a\"/>\n</labels>\n");
  EXPECT_EQ(ReadDataset(arff_, Arff(xml)).status().message(),
            xml + ":3: label 'tag a' is listed twice (also on line 2)");
  // No way to tell the labels.
  EXPECT_EQ(ReadDataset(arff_, Arff()).status().message(),
            arff_ + ": which attributes are the labels? Give MULAN's label XML file (data.label_xml, tether-data "
                    "--label_xml) or the number of labels, the last attributes (data.num_labels, --num_labels)");
  EXPECT_EQ(ReadDataset(dir_.File("none.arff"), Arff(xml_)).status().message(),
            dir_.File("none.arff") + ": no such file");
}

// Streaming keeps the file errors of file_input.h: a truncated gzip stream
// is DataLoss, never a shorter file.
TEST(ArffStream, TruncatedGzipIsDataLoss) {
  testing::ScopedTempDir dir;
  std::ifstream in(kArff, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 300000u);
  const std::string cut = dir.File("cut.arff.gz");
  WriteText(cut, bytes.substr(0, 300000));
  StatusOr<Dataset> ds = ReadDataset(cut, Arff(kXml));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), Status::Code::kDataLoss);
  EXPECT_EQ(ds.status().message(), cut + ": truncated gzip stream");
}

// MULAN's own bibtex.arff reads to exactly the XMC file's matrices.
TEST(ArffBibtex, SameRowsAsTheXmcFile) {
  StatusOr<Dataset> arff = ReadDataset(kArff, Arff(kXml));
  ASSERT_TRUE(arff.ok()) << arff.status().message();
  ReadOptions x;
  x.format = DataFormat::kXmc;
  x.index_base = 0;
  StatusOr<Dataset> xmc = ReadDataset(kXmc, x);
  ASSERT_TRUE(xmc.ok()) << xmc.status().message();
  EXPECT_EQ(arff->features.rows, 7395);
  EXPECT_EQ(arff->features.cols, 1836);
  EXPECT_EQ(arff->labels.cols, 159);
  ExpectSameCsr(arff->features, xmc->features);
  ExpectSameCsr(arff->labels, xmc->labels);
  StatusOr<ArffHeader> h = ReadArffHeader(kArff, Arff(kXml));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->relation, "bibsonomy_bibtex");
  EXPECT_EQ(h->feature_names.size(), 1836u);
  EXPECT_EQ(h->label_names.front(), "TAG_2005");
}

// Every writer is its reader's inverse, bit for bit.
TEST_F(ArffSmall, WritersRoundTrip) {
  StatusOr<Dataset> ds = ReadDataset(arff_, Arff(xml_));
  ASSERT_TRUE(ds.ok());
  // A value that needs all of a float's digits.
  ds->features.values[0] = 0.1f + 1e-8f;
  ReadOptions xmc;
  xmc.format = DataFormat::kXmc;
  xmc.index_base = 1;
  ReadOptions lib;
  lib.format = DataFormat::kLibsvm;
  lib.index_base = 0;
  lib.num_features = 3;
  lib.num_labels = 2;
  // The row with neither labels nor features cannot be an XMC/LIBSVM line.
  EXPECT_EQ(WriteXmc(*ds, dir_.File("out.txt"), 1).message(),
            dir_.File("out.txt") + ": input row 3 (line 13) has neither labels nor features, which XMC cannot hold "
                                   "(it would be a blank line); ARFF can ({})");
  EXPECT_FALSE(Exists(dir_.File("out.txt")));
  ASSERT_TRUE(WriteArff(*ds, dir_.File("out.arff.gz"), dir_.File("out.xml"), "small").ok());
  StatusOr<Dataset> back = ReadDataset(dir_.File("out.arff.gz"), Arff(dir_.File("out.xml")));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ExpectSameCsr(back->features, ds->features);
  ExpectSameCsr(back->labels, ds->labels);
  EXPECT_EQ(back->feature_names, ds->feature_names);
  EXPECT_EQ(back->label_names, ds->label_names);

  // Drop the empty row, then through XMC and LIBSVM.
  const std::vector<int64_t> keep{0, 1, 3};
  Dataset d;
  d.features = GatherRows(ds->features, keep);
  d.labels = GatherRows(ds->labels, keep);
  ASSERT_TRUE(WriteXmc(d, dir_.File("out.txt"), 1).ok());
  StatusOr<Dataset> x = ReadDataset(dir_.File("out.txt"), xmc);
  ASSERT_TRUE(x.ok()) << x.status().message();
  ExpectSameCsr(x->features, d.features);
  ExpectSameCsr(x->labels, d.labels);
  ASSERT_TRUE(WriteLibsvm(d, dir_.File("out.svm"), 0).ok());
  StatusOr<Dataset> l = ReadDataset(dir_.File("out.svm"), lib);
  ASSERT_TRUE(l.ok()) << l.status().message();
  ExpectSameCsr(l->features, d.features);
  ExpectSameCsr(l->labels, d.labels);

  // Single-label LIBSVM stays single-label; it cannot become ARFF or XMC.
  Dataset single = d;
  single.labels = CsrMatrix();
  single.targets = {1, -1, 1};
  ASSERT_TRUE(WriteLibsvm(single, dir_.File("single.svm"), 1).ok());
  ReadOptions one;
  one.format = DataFormat::kLibsvm;
  one.index_base = 1;
  one.num_features = 3;
  StatusOr<Dataset> s = ReadDataset(dir_.File("single.svm"), one);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->targets, single.targets);
  ExpectSameCsr(s->features, single.features);
  EXPECT_EQ(WriteArff(single, dir_.File("s.arff"), dir_.File("s.xml"), "").message(),
            dir_.File("s.arff") + ": the input is single-label (one number per row); ARFF (MULAN, multi-label) holds "
                                  "label sets: convert it to LIBSVM, or give multi-label input");
  EXPECT_FALSE(Exists(dir_.File("s.arff")));
  EXPECT_FALSE(Exists(dir_.File("s.xml")));
  // An unwritable place: IOError, nothing left behind.
  EXPECT_EQ(WriteXmc(d, dir_.File("no/such/dir/x.txt"), 0).code(), Status::Code::kIOError);
}

TEST(DatasetStats, CountsAndQuantiles) {
  Dataset d;
  const uint32_t f[] = {0, 2, 5};
  const float v[] = {1, 1, 1};
  d.features.AppendRow(f, v, 3);
  d.features.AppendRow(f, v, 1);
  d.features.cols = 6;
  const uint32_t l0[] = {0, 1};
  const uint32_t l1[] = {1};
  d.labels.AppendRow(l0, v, 2);
  d.labels.AppendRow(l1, v, 1);
  d.labels.cols = 4;
  const DatasetStats s = ComputeStats(d);
  EXPECT_EQ(s.rows, 2);
  EXPECT_EQ(s.nnz, 4);
  EXPECT_EQ(s.nnz_min, 1);
  EXPECT_EQ(s.nnz_max, 3);
  EXPECT_DOUBLE_EQ(s.nnz_mean, 2.0);
  EXPECT_EQ(s.labels_min, 1);
  EXPECT_EQ(s.labels_max, 2);
  EXPECT_DOUBLE_EQ(s.labels_mean, 1.5);
  EXPECT_EQ(s.unused_features, 3);
  EXPECT_EQ(s.unused_labels, 2);
  // Frequencies sorted: 0 0 1 2.
  EXPECT_EQ(s.label_freq_at, (std::vector<int64_t>{0, 0, 0, 1, 2, 2, 2}));
}

}  // namespace
}  // namespace tether
