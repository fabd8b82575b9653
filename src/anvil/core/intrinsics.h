// <immintrin.h> for the ISA units. GCC 12 warns inside its own AVX-512
// intrinsics (the `__Y = __Y` idiom of _mm512_undefined_*, GCC PR 105593):
// the warning is about the header, not us, so GCC's is silenced around it.
// (Clang, which builds the fuzz targets, has no -Wmaybe-uninitialized and
// would warn about the pragma instead.)
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif
