// CheckEnvironment: the parsers the lazy readers use, run once up front.
#include "anvil/core/environment.h"

#include <cstdlib>

#include "anvil/core/cpu_features.h"
#include "anvil/core/thread_pool.h"

namespace anvil {

Status CheckEnvironment() {
  if (const char* threads = std::getenv("ANVIL_THREADS")) {
    RETURN_IF_ERROR(ParseThreadCount(threads).status());
  }
  if (const char* isa = std::getenv("ANVIL_ISA")) RETURN_IF_ERROR(ParseIsa(isa).status());
  return Status::Ok();
}

}  // namespace anvil
