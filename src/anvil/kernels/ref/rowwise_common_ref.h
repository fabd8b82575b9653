// Shared by the row-wise oracles (norm, rope, act, xent, embedding, optim):
// every element type read as the exact double it stands for, so a reference
// templated on T runs the same double math for f32, bf16 and double inputs.
#pragma once

#include "anvil/core/bf16.h"

namespace anvil::kernels::ref {

inline double AsDouble(double x) { return x; }
inline double AsDouble(float x) { return static_cast<double>(x); }
inline double AsDouble(BF16 x) { return static_cast<double>(ToFloat(x)); }

}  // namespace anvil::kernels::ref
