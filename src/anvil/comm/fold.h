// The rank-order fold every reducing collective uses: out[i] = in[0][i] op
// in[1][i] op ... op in[n-1][i], left to right, one IEEE operation per input in
// the element's type (bf16: in f32, rounded to bf16 once at the end). The
// result depends only on the inputs and their order, never on which rank
// arrived first.
#pragma once

#include <cstdint>
#include <span>

#include "anvil/comm/group.h"

namespace anvil::comm {

// `out` may be one of the inputs (each element is read before it is written).
void FoldInOrder(Type type, ReduceOp op, std::span<const void* const> inputs, void* out,
                 int64_t count);

}  // namespace anvil::comm
