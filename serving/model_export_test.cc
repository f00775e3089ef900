// ModelFileFormatFor: a model file's format follows its name unless asked
// for, and a format that contradicts the name is refused.
#include "serving/model_export.h"

#include <gtest/gtest.h>

namespace tether {
namespace {

TEST(ModelFileFormatFor, FollowsTheNameWhenNotAsked) {
  EXPECT_EQ(*ModelFileFormatFor("m.npz", ""), ModelFileFormat::kNpz);
  EXPECT_EQ(*ModelFileFormatFor("m.safetensors", ""), ModelFileFormat::kSafetensors);
  EXPECT_EQ(*ModelFileFormatFor("model", ""), ModelFileFormat::kSafetensors);
}

TEST(ModelFileFormatFor, TakesTheFormatAskedForInAnyCase) {
  EXPECT_EQ(*ModelFileFormatFor("m.npz", "NPZ"), ModelFileFormat::kNpz);
  EXPECT_EQ(*ModelFileFormatFor("model.bin", "npz"), ModelFileFormat::kNpz);
  EXPECT_EQ(*ModelFileFormatFor("model.bin", "safetensors"), ModelFileFormat::kSafetensors);
}

TEST(ModelFileFormatFor, RefusesAFormatThatContradictsTheName) {
  EXPECT_EQ(ModelFileFormatFor("x.npz", "safetensors").status().message(),
            "--format=safetensors contradicts the file name 'x.npz': name the file after its format (.npz for "
            "npz, .safetensors for safetensors), or leave --format out to take it from the name");
  EXPECT_FALSE(ModelFileFormatFor("x.safetensors", "npz").ok());
  EXPECT_EQ(ModelFileFormatFor("x.bin", "onnx").status().message(),
            "model file format must be safetensors or npz, got 'onnx'");
}

}  // namespace
}  // namespace tether
