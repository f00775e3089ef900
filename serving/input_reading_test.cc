// ResolveInputReading (serving/input_reading.h): tether-predict reads its
// input as the model's data was read unless a flag says otherwise, and a
// flag that contradicts the model is named with both values.
#include "serving/input_reading.h"

#include <gtest/gtest.h>

namespace tether {
namespace {

JobConfig Model(FileFormat format, int index_base) {
  JobConfig c;
  c.mutable_data()->set_format(format);
  c.mutable_data()->set_index_base(index_base);
  return c;
}

InputReading Resolve(const JobConfig& model, const std::string& format, int index_base) {
  StatusOr<InputReading> r = ResolveInputReading(model, "m.safetensors", format, index_base);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : InputReading();
}

TEST(InputReadingTest, UnsetFlagsTakeTheModelsFormatAndIndexBase) {
  const InputReading r = Resolve(Model(LIBSVM, 1), "", -1);
  EXPECT_EQ(r.format, LIBSVM);
  EXPECT_EQ(r.index_base, 1);
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_EQ(r.source, "format libsvm (the model's), index base 1 (the model's)");
  const InputReading x = Resolve(Model(XMC, 0), "", -1);
  EXPECT_EQ(x.format, XMC);
  EXPECT_EQ(x.index_base, 0);
}

TEST(InputReadingTest, FlagsThatAgreeWithTheModelSayNothing) {
  const InputReading r = Resolve(Model(XMC, 0), "xmc", 0);
  EXPECT_EQ(r.format, XMC);
  EXPECT_EQ(r.index_base, 0);
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_EQ(r.source, "format xmc, index base 0");
}

TEST(InputReadingTest, AnIndexBaseThatContradictsTheModelIsNamedWithBothValues) {
  const InputReading r = Resolve(Model(XMC, 0), "", 1);
  EXPECT_EQ(r.index_base, 1);  // the input's own numbering, as the flag says
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0],
            "--index_base=1 contradicts m.safetensors's data.index_base 0 (the data it was trained on): the input's "
            "feature id i is scored as the model's feature i - 1 (and XMC label ids are written 1-based); right only "
            "for an input numbered from 1: drop --index_base to read it as the model's data was read");
  const InputReading down = Resolve(Model(LIBSVM, 1), "libsvm", 0);
  ASSERT_EQ(down.warnings.size(), 1u);
  EXPECT_NE(down.warnings[0].find("--index_base=0 contradicts m.safetensors's data.index_base 1 (the data it was "
                                  "trained on): the input's feature id i is scored as the model's feature i + 1"),
            std::string::npos);
}

TEST(InputReadingTest, AFormatThatContradictsTheModelIsNamedWithBothValues) {
  const InputReading r = Resolve(Model(XMC, 0), "libsvm", -1);
  EXPECT_EQ(r.format, LIBSVM);
  EXPECT_EQ(r.index_base, 0);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0],
            "--format=libsvm contradicts m.safetensors's data.format xmc (the data it was trained on): the input is "
            "read as libsvm; drop --format to read it as the model's data was read");
}

TEST(InputReadingTest, WhatTheModelCannotSupplyIsRequiredNamingTheFlag) {
  // An ARFF model: 0-based by definition, but not a format tether-predict reads.
  StatusOr<InputReading> arff = ResolveInputReading(Model(ARFF, -1), "m.npz", "", -1);
  EXPECT_EQ(arff.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(arff.status().message(),
            "--format is required: m.npz was trained on ARFF data (data.format), and tether-predict reads xmc or "
            "libsvm text");
  const InputReading given = Resolve(Model(ARFF, -1), "xmc", -1);
  EXPECT_EQ(given.index_base, 0);
  EXPECT_TRUE(given.warnings.empty());
  StatusOr<InputReading> idx = ResolveInputReading(Model(IDX, -1), "m.npz", "libsvm", -1);
  EXPECT_EQ(idx.status().message(), "--index_base is required: m.npz records no index base (data.index_base -1)");
  EXPECT_EQ(Resolve(Model(IDX, -1), "libsvm", 1).index_base, 1);
}

}  // namespace
}  // namespace tether
