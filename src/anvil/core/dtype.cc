// Parsing dtype names (from configs and flags).
#include "anvil/core/dtype.h"

#include <string>

namespace anvil {

Result<DType> ParseDType(std::string_view name) {
  std::string valid;
  for (DType dtype : kAllDTypes) {
    if (name == DTypeName(dtype)) return dtype;
    if (!valid.empty()) valid += ", ";
    valid += DTypeName(dtype);
  }
  return InvalidArgument("unknown dtype '" + std::string(name) + "'; expected one of: " + valid);
}

}  // namespace anvil
