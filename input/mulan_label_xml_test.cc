// MULAN's label XML: names in file order with entities decoded and their
// lines, comments and processing instructions skipped, and each kind of bad
// file refused naming path:line.
#include "input/mulan_label_xml.h"

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/testing/temp_dir.h"

namespace tether {
namespace {

class MulanLabelXmlTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    std::ofstream(path_) << text;
    return path_;
  }
  testing::ScopedTempDir dir_;
  std::string path_ = dir_.File("labels.xml");
};

TEST_F(MulanLabelXmlTest, ReadsNamesInOrderWithTheirLines) {
  StatusOr<std::vector<XmlLabel>> l = ParseLabelXml(
      Write("<?xml version=\"1.0\"?>\n<labels xmlns=\"http://mulan.sourceforge.net/labels\">\n"
            "<!-- <label name=\"commented\"/> -->\n<label name=\"a &amp; b\"><label\n name = 'c'/></label>\n"
            "</labels>\n"));
  ASSERT_TRUE(l.ok()) << l.status().message();
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[0].name, "a & b");
  EXPECT_EQ((*l)[0].line, 4);
  EXPECT_EQ((*l)[1].name, "c");
  EXPECT_EQ((*l)[1].line, 4);
}

TEST_F(MulanLabelXmlTest, BadFilesAreRefusedNamingTheLine) {
  EXPECT_EQ(ParseLabelXml(Write("<labels>\n<label name=\"a\"/>\n<label name=\"a\"/>\n</labels>\n")).status().message(),
            path_ + ":3: label 'a' is listed twice (also on line 2)");
  EXPECT_EQ(ParseLabelXml(Write("<labels>\n<label id=\"a\"/>\n</labels>\n")).status().message(),
            path_ + ":2: <label> without a name attribute");
  EXPECT_EQ(ParseLabelXml(Write("<labels>\n<!-- open\n")).status().message(), path_ + ":2: unterminated comment");
  EXPECT_EQ(ParseLabelXml(Write("<labels></labels>\n")).status().message(),
            path_ + ": no <label> elements found (not a MULAN label XML file?)");
}

}  // namespace
}  // namespace tether
