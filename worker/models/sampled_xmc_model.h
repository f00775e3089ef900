// The XMC MLP with a sampled softmax (model.sampled_labels = K > 0): for
// label sets too large to pull whole every minibatch (Amazon-670K: 670,091
// labels × 257 floats = 690 MB per pull). Each training minibatch pulls and
// pushes only K rows of w2: the batch's positive labels plus labels drawn
// uniformly from the rest (worker/sampling.h, SampleOutputLabels), and the
// softmax runs over those K (Jean et al., ACL 2015; Bengio & Senécal 2008).
// The compute is XmcMlp's, on the K-label sub-problem.
//
// Evaluation scores every label: BeginEvaluation pulls all of w2 once, the
// evaluation minibatches then pull only their w1 rows and b1, and
// EndEvaluation frees the full output layer again. Memory during an
// evaluation: L × (H + 1) floats for w2 plus eval_minibatch_size × L scores.
//
// With K >= L every label is a key each minibatch and training is the full
// softmax (the same sums, in another layout).
//
// Ownership and thread-safety: as every Model (worker/models/model.h).
#pragma once

#include <memory>
#include <vector>

#include "core/config.h"
#include "core/status.h"
#include "compute/backend.h"
#include "worker/models/model.h"

namespace tether {

/// `rank`: the worker's, which seeds its negatives (NegativeSamplingSeed).
/// Errors: InvalidArgument when the loss is not softmax or a table is
/// missing or misshapen.
StatusOr<std::unique_ptr<Model>> CreateSampledXmcMlpModel(const JobConfig& config, const std::vector<TableSpec>& tables,
                                                          Backend* backend, int rank = 0);

}  // namespace tether
