// The values a job config's fields take: adaptive batch sizes, data on
// demand's chunks, repeated table blocks, every optimizer field's range and
// finiteness, decoupled weight decay, schedules, delay compensation and input
// dropout, each
// refused naming the field (config_test.cc holds loading, overrides and the
// summary lines).
#include "core/config.h"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace tether {
namespace {

TEST(ConfigTest, AdaptiveBatchFlagsDefaultsAndBounds) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");  // minibatch_size 64
  ASSERT_TRUE(c.ok());
  JobConfig j = *c;
  ASSERT_TRUE(ApplyOverride(&j, "train.adaptive_batch.enabled", "true", "flag --adaptive_batch").ok());
  ASSERT_TRUE(ApplyOverride(&j, "train.adaptive_batch.step_scaling", "server_weight", "flag --adaptive_batch_step").ok());
  EXPECT_TRUE(j.train().adaptive_batch().enabled());
  EXPECT_EQ(j.train().adaptive_batch().step_scaling(), AdaptiveBatchConfig::SERVER_WEIGHT);
  EXPECT_TRUE(ValidateJobConfig(j).ok());
  const AdaptiveBatchConfig r = ResolvedAdaptiveBatch(j.train());
  EXPECT_EQ(r.b_min(), 16);
  EXPECT_EQ(r.b_max(), 256);
  EXPECT_EQ(r.warmup_clocks(), 5);
  j.mutable_train()->set_minibatch_size(3);
  EXPECT_EQ(ResolvedAdaptiveBatch(j.train()).b_min(), 1);  // at least 1
  j = *c;
  j.mutable_train()->mutable_adaptive_batch()->set_b_min(65);
  EXPECT_EQ(ValidateJobConfig(j).message(),
            "config field train.adaptive_batch.b_min: 65 is above train.minibatch_size (64), the mean batch the "
            "workers keep");
  j = *c;
  j.mutable_train()->mutable_adaptive_batch()->set_b_max(32);
  EXPECT_EQ(ValidateJobConfig(j).message(),
            "config field train.adaptive_batch.b_max: 32 is below train.minibatch_size (64), the mean batch the "
            "workers keep");
  j = *c;
  j.mutable_train()->mutable_adaptive_batch()->set_smoothing(0);
  EXPECT_EQ(ValidateJobConfig(j).message(),
            "config field train.adaptive_batch.smoothing: must be in (0, 1] (1: move to the new size at once)");
  j = *c;
  j.mutable_train()->mutable_adaptive_batch()->set_window_clocks(0);
  EXPECT_EQ(ValidateJobConfig(j).message(), "config field train.adaptive_batch.window_clocks: must be ≥ 1");
  j = *c;
  Status st = ApplyOverride(&j, "train.adaptive_batch.step_scaling", "quadratic", "flag --adaptive_batch_step");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--adaptive_batch_step"), std::string::npos) << st.message();
}

// Data on demand (train.data_on_demand): the chunk size's default and the
// combinations refused at start, each naming its field.
TEST(ConfigTest, DataOnDemandChunkRowsAndRefusedCombinations) {
  auto c = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(c.ok());
  JobConfig j = *c;
  j.mutable_train()->set_data_on_demand(true);
  EXPECT_TRUE(ValidateJobConfig(j).ok());
  EXPECT_EQ(EffectiveChunkRows(j.train()), 4 * 64);  // 0: 4 x minibatch_size
  j.mutable_train()->set_chunk_rows(100);
  EXPECT_EQ(EffectiveChunkRows(j.train()), 100);
  j.mutable_train()->set_chunk_rows(-1);
  EXPECT_NE(ValidateJobConfig(j).message().find("train.chunk_rows: must be ≥ 0"), std::string::npos)
      << ValidateJobConfig(j).message();
  j = *c;
  j.mutable_train()->set_data_on_demand(true);
  j.mutable_checkpoint()->set_dir("/tmp/ckpt");
  EXPECT_TRUE(ValidateJobConfig(j).ok()) << "data on demand checkpoints (checkpoint/chunk_state.h): "
                                         << ValidateJobConfig(j).message();
  // Joins still do not combine with checkpoints (the cut, not the data).
  j.mutable_cluster()->set_max_workers(j.cluster().num_workers() + 1);
  EXPECT_EQ(CheckWorkerRank(j, j.cluster().num_workers(), /*has_data=*/true).code(),
            Status::Code::kFailedPrecondition);
  EXPECT_TRUE(CheckWorkerRank(j, 0, /*has_data=*/true).ok());
  j = *c;
  j.mutable_train()->set_data_on_demand(true);
  j.mutable_data()->set_streaming(true);
  j.mutable_data()->clear_train_split();
  // Streamed files are dealt as byte ranges (server/coordinator/chunk_coordinator.h
  // MakeByteChunks), in chunks of train.chunk_bytes (0: derived).
  EXPECT_TRUE(ValidateJobConfig(j).ok()) << ValidateJobConfig(j).message();
  j.mutable_train()->set_chunk_bytes(65536);
  EXPECT_TRUE(ValidateJobConfig(j).ok()) << ValidateJobConfig(j).message();
  EXPECT_TRUE(CheckOverridesApply(j, {{"chunk_bytes", "65536"}}).ok());
  j.mutable_train()->set_chunk_bytes(-1);
  EXPECT_EQ(ValidateJobConfig(j).message().rfind("config field train.chunk_bytes: must be ≥ 0", 0), 0u)
      << ValidateJobConfig(j).message();
  j.mutable_train()->set_chunk_bytes(0);
  // Still no checkpoints for streamed data: the dealing state numbers rows
  // in memory.
  j.mutable_checkpoint()->set_dir("/tmp/ckpt");
  EXPECT_EQ(ValidateJobConfig(j).message().rfind("config field checkpoint.dir: is set but data.streaming is true", 0),
            0u)
      << ValidateJobConfig(j).message();
  j.mutable_checkpoint()->clear_dir();
  // --chunk_bytes is read only by streamed data on demand.
  j.mutable_data()->set_streaming(false);
  EXPECT_EQ(CheckOverridesApply(j, {{"chunk_bytes", "4096"}}).message(),
            "flag --chunk_bytes=4096 is only read with train.data_on_demand true and data.streaming true, which "
            "this job does not set: add --data_on_demand=true (with data.streaming: true in the config), or drop "
            "--chunk_bytes");
}

TEST(ConfigTest, ClosestName) {
  EXPECT_EQ(ClosestName("stalenes", {"staleness", "seed", "epochs"}), "staleness");
  EXPECT_EQ(ClosestName("zzzzzzzz", {"staleness", "seed"}), "");
}

// C23: a repeated entry keyed by its name (two `table { name: "w2" }`
// blocks) is refused, naming both lines, instead of the last one winning.
TEST(ConfigTest, C23RepeatedTableBlockIsRefusedNamingBothLines) {
  const std::string path = "tests/data/cases/C23_dup_table_staleness.pbtxt";
  auto c = LoadJobConfig(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(c.status().message(), path + ":27: table \"w2\" is already configured at line 23");
  // Same line, different names: accepted; the same name on one line: refused.
  auto two = ParseJobConfig("table { name: \"w1\" } table { name: \"w2\" }\n", "j.pbtxt");
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(two->table_size(), 2);
  auto one_line = ParseJobConfig("name: \"x\"\ntable { name: \"w1\" } table { name: \"w1\" }\n", "j.pbtxt");
  ASSERT_FALSE(one_line.ok());
  EXPECT_EQ(one_line.status().message(), "j.pbtxt:2: table \"w1\" is already configured at line 2");
  // The list syntax of text format is the same repeated field.
  auto list = ParseJobConfig("table [\n{ name: \"b1\" },\n{ name: \"b1\" }\n]\n", "j.pbtxt");
  ASSERT_FALSE(list.ok());
  // (the first entry of a list is placed at its "table [" line)
  EXPECT_EQ(list.status().message(), "j.pbtxt:3: table \"b1\" is already configured at line 1");
}

// C22: every optimizer field is checked like the learning rate (finite, in
// range, field and range named), the case's configs included: AdaGrad with
// initial_accumulator 0 and epsilon 0 (0/0 on a zero gradient), a negative
// epsilon, l2 nan.
TEST(ConfigTest, C22EveryOptimizerFieldIsCheckedForFinitenessAndRange) {
  struct File {
    const char* name;
    const char* message;
  };
  for (const File& f : {File{"C22_lr_adagrad_zero_acc.pbtxt", "config field optimizer.epsilon: must be a finite number > 0"},
                        File{"C22_adagrad_epsilon_negative.pbtxt", "config field optimizer.epsilon: must be a finite number > 0"},
                        File{"C22_adagrad_l2_nan.pbtxt", "config field optimizer.l2: must be a finite number ≥ 0"}}) {
    auto c = LoadJobConfig(std::string("tests/data/cases/") + f.name);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(ValidateJobConfig(*c).message(), f.message) << f.name;
  }
  auto base = LoadJobConfig("tests/data/cases/C22_lr_base.pbtxt");
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  ASSERT_TRUE(ValidateJobConfig(*base).ok());
  struct Case {
    const char* field;
    const char* value;
    const char* why;
  };
  for (const Case& k : {Case{"learning_rate", "0", "must be a finite number > 0"},
                        Case{"momentum", "1", "must be in [0, 1)"},
                        Case{"momentum", "-0.5", "must be in [0, 1)"},
                        Case{"initial_accumulator", "inf", "must be a finite number ≥ 0"},
                        Case{"initial_accumulator", "-1", "must be a finite number ≥ 0"},
                        Case{"epsilon", "0", "must be a finite number > 0"},
                        Case{"epsilon", "nan", "must be a finite number > 0"},
                        Case{"l2", "inf", "must be a finite number ≥ 0"},
                        Case{"beta1", "nan", "must be in [0, 1)"},
                        Case{"beta1", "1", "must be in [0, 1)"},
                        Case{"beta2", "-inf", "must be in [0, 1)"},
                        // FTRL (McMahan et al., KDD 2013).
                        Case{"alpha", "0", "must be a finite number > 0"},
                        Case{"alpha", "inf", "must be a finite number > 0"},
                        Case{"beta", "-1", "must be a finite number ≥ 0"},
                        Case{"beta", "nan", "must be a finite number ≥ 0"},
                        Case{"l1", "-0.5", "must be a finite number ≥ 0"},
                        Case{"l1", "inf", "must be a finite number ≥ 0"},
                        // Delay compensation (DC-ASGD, Zheng et al., ICML 2017).
                        Case{"delay_compensation", "-0.5", "must be a finite number ≥ 0 (λ of delay compensation; 0: off)"},
                        Case{"delay_compensation", "inf", "must be a finite number ≥ 0 (λ of delay compensation; 0: off)"},
                        Case{"delay_compensation", "nan", "must be a finite number ≥ 0 (λ of delay compensation; 0: off)"}}) {
    // The job's optimizer and a table's own are checked alike.
    JobConfig j = *base;
    const std::string text = std::string("optimizer { ") + k.field + ": " + k.value + " }";
    ASSERT_TRUE(google::protobuf::TextFormat::MergeFromString(text, &j)) << text;
    EXPECT_EQ(ValidateJobConfig(j).message(), std::string("config field optimizer.") + k.field + ": " + k.why) << text;
    j = *base;
    ASSERT_TRUE(google::protobuf::TextFormat::MergeFromString("table { name: \"w\" " + text + " }", &j)) << text;
    EXPECT_EQ(ValidateJobConfig(j).message(), std::string("config field table[w].optimizer.") + k.field + ": " + k.why)
        << text;
  }
}

// AdamW's decay and the learning-rate schedule: ranges, the types that read
// them, epochs that were never resolved into clocks, and AVERAGE.
TEST(ConfigTest, WeightDecayAndScheduleAreValidated) {
  auto base = LoadJobConfig("tests/data/cases/C22_lr_base.pbtxt");
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  struct Case {
    const char* text;
    const char* message;  // "" when valid
  };
  for (const Case& k :
       {Case{"optimizer { type: ADAM weight_decay: 0.01 }", ""},
        Case{"optimizer { type: ADAM weight_decay: -0.01 }",
             "config field optimizer.weight_decay: must be a finite number ≥ 0 with learning_rate × weight_decay < 1"},
        Case{"optimizer { type: ADAM learning_rate: 0.5 weight_decay: 2 }",
             "config field optimizer.weight_decay: must be a finite number ≥ 0 with learning_rate × weight_decay < 1"},
        Case{"optimizer { type: ADAGRAD weight_decay: 0.01 }",
             "config field optimizer.weight_decay: is read by type ADAM only (decoupled weight decay, AdamW), not "
             "ADAGRAD: use l2 with the others"},
        Case{"optimizer { type: ADAM schedule { decay: COSINE warmup_clocks: 10 decay_clocks: 100 } }", ""},
        Case{"optimizer { type: ADAM schedule { decay: COSINE } }",
             "config field optimizer.schedule.decay_clocks: must be ≥ 1 with decay COSINE (the training is shorter "
             "than its warm-up?)"},
        Case{"optimizer { type: SGD schedule { final_factor: 2 } }",
             "config field optimizer.schedule.final_factor: must be in [0, 1]"},
        Case{"optimizer { type: FTRL schedule { warmup_clocks: 5 } }",
             "config field optimizer.schedule.decay: a schedule needs optimizer type ADAM, ADAGRAD or SGD, not FTRL "
             "(FTRL divides by its rate alpha)"},
        Case{"optimizer { type: ADAM schedule { warmup_epochs: 1 } }",
             "config field optimizer.schedule.warmup_epochs: was not resolved into clocks (a shard reads clocks "
             "only)"},
        Case{"optimizer { type: ADAM schedule { warmup_clocks: 5 } } consistency { model: AVERAGE period_rows: 64 "
             "staleness: 0 }",
             "config field optimizer.schedule: is applied by the servers to pushed gradients; under "
             "consistency.model AVERAGE the workers' replicas take the steps: drop the schedule"}}) {
    JobConfig j = *base;
    ASSERT_TRUE(google::protobuf::TextFormat::MergeFromString(k.text, &j)) << k.text;
    EXPECT_EQ(ValidateJobConfig(j).message(), k.message) << k.text;
  }
}

// Delay compensation: any optimizer type, off at 0, refused under AVERAGE
// (the servers take no gradients there).
TEST(ConfigTest, DelayCompensationIsValidated) {
  auto base = LoadJobConfig("tests/data/cases/C22_lr_base.pbtxt");
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  struct Case {
    const char* text;
    const char* message;  // "" when valid
  };
  for (const Case& k :
       {Case{"optimizer { type: ADAM delay_compensation: 0.04 }", ""},
        Case{"optimizer { type: FTRL delay_compensation: 2 }", ""},
        Case{"optimizer { delay_compensation: 0 } consistency { model: AVERAGE period_rows: 64 staleness: 0 }", ""},
        Case{"optimizer { type: SGD delay_compensation: -1 }",
             "config field optimizer.delay_compensation: must be a finite number ≥ 0 (λ of delay compensation; 0: "
             "off)"},
        Case{"optimizer { type: ADAM delay_compensation: 0.5 } consistency { model: AVERAGE period_rows: 64 "
             "staleness: 0 }",
             "config field optimizer.delay_compensation: corrects pushed gradients on the servers; under "
             "consistency.model AVERAGE the servers merge model deltas: drop it"},
        Case{"table { name: \"w\" optimizer { delay_compensation: 0.5 } } consistency { model: AVERAGE "
             "period_rows: 64 staleness: 0 }",
             "config field table[w].optimizer.delay_compensation: corrects pushed gradients on the servers; under "
             "consistency.model AVERAGE the servers merge model deltas: drop it"}}) {
    JobConfig j = *base;
    ASSERT_TRUE(google::protobuf::TextFormat::MergeFromString(k.text, &j)) << k.text;
    EXPECT_EQ(ValidateJobConfig(j).message(), k.message) << k.text;
  }
}

// Input dropout: in [0, 1), read by the built-in XMC_MLP only (not the
// sampled softmax, DENSE_MLP or SPARSE_LR), set by --input_dropout.
TEST(ConfigTest, InputDropoutIsValidatedAndOverridden) {
  auto base = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  struct Case {
    const char* text;
    const char* message;  // "" when valid
  };
  for (const Case& k :
       {Case{"model { input_dropout: 0.3 }", ""},
        Case{"model { input_dropout: 0 type: SPARSE_LR }", ""},
        Case{"model { input_dropout: 1 }", "config field model.input_dropout: must be in [0, 1)"},
        Case{"model { input_dropout: -0.1 }", "config field model.input_dropout: must be in [0, 1)"},
        Case{"model { input_dropout: nan }", "config field model.input_dropout: must be in [0, 1)"},
        Case{"model { input_dropout: 0.3 sampled_labels: 20 }",
             "config field model.input_dropout: is not read with model.sampled_labels > 0 (the sampled softmax)"},
        Case{"model { input_dropout: 0.3 type: SPARSE_LR }",
             "config field model.input_dropout: is read by the XMC_MLP model only, not SPARSE_LR"},
        Case{"model { input_dropout: 0.3 name: \"dense_mlp\" }",
             "config field model.input_dropout: is read by the XMC_MLP model only, not model 'dense_mlp'"}}) {
    JobConfig j = *base;
    ASSERT_TRUE(google::protobuf::TextFormat::MergeFromString(k.text, &j)) << k.text;
    if (j.model().type() == SPARSE_LR) j.mutable_model()->clear_hidden();  // the XMC job's width
    EXPECT_EQ(ValidateJobConfig(j).message(), k.message) << k.text;
  }
  bool found = false;
  for (const ConfigOverride& o : ConfigOverrides())
    found |= std::string(o.flag) == "input_dropout" && std::string(o.field_path) == "model.input_dropout";
  EXPECT_TRUE(found);
  JobConfig j = *base;
  ASSERT_TRUE(ApplyOverride(&j, "model.input_dropout", "0.25", "flag --input_dropout").ok());
  EXPECT_FLOAT_EQ(j.model().input_dropout(), 0.25f);
  EXPECT_FLOAT_EQ(base->model().input_dropout(), 0.0f);  // off unless set
}

// DENSE_MLP with model.hidden_layers, and SPARSE_LR, do not read
// model.hidden: a width set there (--hidden) is refused rather than
// silently ignored.
TEST(ConfigTest, HiddenWidthBesideHiddenLayersIsRefused) {
  auto base = LoadJobConfig("examples/mnist.pbtxt");
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  ASSERT_TRUE(ValidateJobConfig(*base).ok()) << ValidateJobConfig(*base).ToString();
  JobConfig j = *base;
  ASSERT_TRUE(ApplyOverride(&j, "model.hidden", "1024", "flag --hidden").ok());
  EXPECT_EQ(ValidateJobConfig(j).message(),
            "config field model.hidden: is not read by DENSE_MLP when model.hidden_layers is set (512): set the "
            "hidden widths in model.hidden_layers");
  j.mutable_model()->add_hidden_layers(64);
  EXPECT_NE(ValidateJobConfig(j).message().find("(512, 64)"), std::string::npos) << ValidateJobConfig(j).message();
  // One hidden layer of width model.hidden when hidden_layers is empty.
  j.mutable_model()->clear_hidden_layers();
  EXPECT_TRUE(ValidateJobConfig(j).ok()) << ValidateJobConfig(j).ToString();
  // XMC_MLP reads model.hidden.
  auto xmc = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(xmc.ok()) << xmc.status().ToString();
  ASSERT_TRUE(ApplyOverride(&*xmc, "model.hidden", "1024", "flag --hidden").ok());
  EXPECT_TRUE(ValidateJobConfig(*xmc).ok()) << ValidateJobConfig(*xmc).ToString();
  // SPARSE_LR has no hidden layer: a width set (--hidden) is refused.
  auto lr = LoadJobConfig("examples/a9a.pbtxt");
  ASSERT_TRUE(lr.ok()) << lr.status().ToString();
  ASSERT_TRUE(ValidateJobConfig(*lr).ok()) << ValidateJobConfig(*lr).ToString();
  ASSERT_TRUE(ApplyOverride(&*lr, "model.hidden", "256", "flag --hidden").ok());
  EXPECT_EQ(ValidateJobConfig(*lr).message(),
            "config field model.hidden: is not read by SPARSE_LR, a linear model without a hidden layer");
}

// model.loss BCE and model.sampled_labels are the XMC model's: DENSE_MLP
// and SPARSE_LR refuse them rather than train their own loss unasked.
TEST(ConfigTest, XmcOutputFieldsAreRefusedByOtherModels) {
  auto mnist = LoadJobConfig("examples/mnist.pbtxt");
  ASSERT_TRUE(mnist.ok()) << mnist.status().ToString();
  JobConfig j = *mnist;
  ASSERT_TRUE(ApplyOverride(&j, "model.loss", "bce", "flag --loss").ok());
  EXPECT_EQ(ValidateJobConfig(j).message(),
            "config field model.loss: BCE is read by the XMC_MLP model only, not DENSE_MLP (DENSE_MLP trains a "
            "softmax over its classes, SPARSE_LR the logistic loss)");
  j = *mnist;
  ASSERT_TRUE(ApplyOverride(&j, "model.sampled_labels", "5", "flag --sampled_labels").ok());
  EXPECT_EQ(ValidateJobConfig(j).message(),
            "config field model.sampled_labels: is read by the XMC_MLP model only, not DENSE_MLP");
  auto a9a = LoadJobConfig("examples/a9a.pbtxt");
  ASSERT_TRUE(a9a.ok()) << a9a.status().ToString();
  ASSERT_TRUE(ValidateJobConfig(*a9a).ok()) << ValidateJobConfig(*a9a).ToString();
  ASSERT_TRUE(ApplyOverride(&*a9a, "model.loss", "bce", "flag --loss").ok());
  EXPECT_NE(ValidateJobConfig(*a9a).message().find("not SPARSE_LR"), std::string::npos)
      << ValidateJobConfig(*a9a).message();
  // The XMC model reads both.
  auto xmc = LoadJobConfig("tests/data/bibtex_fixed.pbtxt");
  ASSERT_TRUE(xmc.ok()) << xmc.status().ToString();
  ASSERT_TRUE(ApplyOverride(&*xmc, "model.loss", "bce", "flag --loss").ok());
  EXPECT_TRUE(ValidateJobConfig(*xmc).ok()) << ValidateJobConfig(*xmc).ToString();
}

// A missing data file is found before anything starts,
// naming the field and the full path tried.

}  // namespace
}  // namespace tether
