// The EvalPartial messages of partitioned evaluation (EVAL_GATHER and its
// reply) travel in a Message's values frame, not its header: a worker's
// partial holds per-label training counts (multi-label) or every test
// score (binary), which can exceed the 1 MiB header limit (limits.h). The
// partials are serialized one after another and zero-padded to whole
// floats; the body's partial_bytes (EvalGatherBody, EvalGatherReplyBody)
// lists their sizes.
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

/// Evaluation rounds (EvalGatherBody.round): the job's start (training
/// label counts, test row counts), e >= 1 after epoch e, and the final one;
/// kValidationEvalRound + e: the validation split after epoch e.
inline constexpr int64_t kSetupEvalRound = 0;
inline constexpr int64_t kFinalEvalRound = int64_t{1} << 40;
inline constexpr int64_t kValidationEvalRound = int64_t{1} << 41;

/// Writes `partials` into m->values and m->header (the partial_bytes of
/// the body of m->header.type(), which the caller set first: EVAL_GATHER or
/// EVAL_GATHER_REPLY; num_values); replaces any values m held. Errors: InvalidArgument when
/// they exceed kMaxFrameBytes (names the size).
[[nodiscard]] Status PackEvalPartials(const std::vector<EvalPartial>& partials, Message* m);

/// Parses the partials m carries (none when its body's partial_bytes is empty).
/// `peer` names the sender in errors. Errors: DataLoss when the sizes
/// overrun the values frame or a partial does not parse.
[[nodiscard]] Status UnpackEvalPartials(const Message& m, const std::string& peer, std::vector<EvalPartial>* out);

}  // namespace tether
