// The EvalPartial messages of partitioned evaluation (EVAL_GATHER and its
// reply) travel in a Message's values frame, not its header: a worker's
// partial holds per-label training counts (multi-label) or every test
// score (binary), which can exceed the 1 MiB header limit (limits.h). The
// partials are serialized one after another and zero-padded to whole
// floats; header.eval_partial_bytes lists their sizes.
//
// Pure functions of their arguments; thread-compatible.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/net/message.h"
#include "core/status.h"
#include "proto/wire.pb.h"

namespace tether {

/// Evaluation rounds (MessageHeader.eval_round): the job's start (training
/// label counts, test row counts), e >= 1 after epoch e, and the final one;
/// kValidationEvalRound + e: the validation split after epoch e.
inline constexpr int64_t kSetupEvalRound = 0;
inline constexpr int64_t kFinalEvalRound = int64_t{1} << 40;
inline constexpr int64_t kValidationEvalRound = int64_t{1} << 41;

/// Writes `partials` into m->values and m->header (eval_partial_bytes,
/// num_values); replaces any values m held. Errors: InvalidArgument when
/// they exceed kMaxFrameBytes (names the size).
[[nodiscard]] Status PackEvalPartials(const std::vector<EvalPartial>& partials, Message* m);

/// Parses the partials m carries (none when eval_partial_bytes is empty).
/// `peer` names the sender in errors. Errors: DataLoss when the sizes
/// overrun the values frame or a partial does not parse.
[[nodiscard]] Status UnpackEvalPartials(const Message& m, const std::string& peer, std::vector<EvalPartial>* out);

}  // namespace tether
