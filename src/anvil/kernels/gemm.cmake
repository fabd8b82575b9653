# GEMM: gemm.h (API), gemm_int.h (W8A8/W4A8 inference: cpu/gemm_int*.cc), ref/gemm_ref.h and ref/gemm_fp8_ref.h (double oracles),
# cpu/gemm.cc (checks, tiers, thread partition), cpu/gemm_scalar.cc (portable
# tier), AVX2 and AVX-512 units (packed driver cpu/gemm_driver.h, packing,
# FP8 packing and block scaling cpu/gemm_fp8.h, streaming decode).
set(_gemm ${CMAKE_CURRENT_LIST_DIR})
set(_gemm_sources
  ${_gemm}/cpu/gemm.cc
  ${_gemm}/cpu/gemm_scalar.cc
  ${_gemm}/cpu/gemm_avx2.cc
  ${_gemm}/cpu/gemm_avx2_pack.cc
  ${_gemm}/cpu/gemm_avx2_decode.cc
  ${_gemm}/cpu/gemm_avx2_fp8_decode.cc
  ${_gemm}/cpu/gemm_avx512.cc
  ${_gemm}/cpu/gemm_avx512_pack.cc
  ${_gemm}/cpu/gemm_avx512_decode.cc
  ${_gemm}/cpu/gemm_avx512_fp8_decode.cc
  ${_gemm}/cpu/gemm_avx512_fp8_pack.cc
  ${_gemm}/cpu/gemm_amx.cc
  ${_gemm}/cpu/gemm_int.cc
  ${_gemm}/cpu/gemm_int_avx2.cc
  ${_gemm}/cpu/gemm_int_avxvnni.cc
  ${_gemm}/cpu/gemm_int_avx512.cc
  ${_gemm}/cpu/gemm_int_amx.cc
  ${_gemm}/cpu/gemm_int_rows_avx2.cc
  ${_gemm}/cpu/gemm_int_rows_avx512.cc
)
target_sources(anvil_kernels PRIVATE ${_gemm_sources})
anvil_isa_source(AVX2 ${_gemm}/cpu/gemm_avx2.cc ${_gemm}/cpu/gemm_avx2_pack.cc
                 ${_gemm}/cpu/gemm_avx2_decode.cc ${_gemm}/cpu/gemm_avx2_fp8_decode.cc
                 ${_gemm}/cpu/gemm_int_avx2.cc ${_gemm}/cpu/gemm_int_rows_avx2.cc)
anvil_isa_source(AVXVNNI ${_gemm}/cpu/gemm_int_avxvnni.cc)
anvil_isa_source(AVX512VBMI ${_gemm}/cpu/gemm_avx512_fp8_decode.cc
                 ${_gemm}/cpu/gemm_avx512_fp8_pack.cc)
anvil_isa_source(AMX ${_gemm}/cpu/gemm_amx.cc ${_gemm}/cpu/gemm_int_amx.cc)
anvil_isa_source(AVX512 ${_gemm}/cpu/gemm_avx512.cc ${_gemm}/cpu/gemm_avx512_pack.cc
                 ${_gemm}/cpu/gemm_avx512_decode.cc ${_gemm}/cpu/gemm_int_avx512.cc
                 ${_gemm}/cpu/gemm_int_rows_avx512.cc)
# Every fused multiply-add is written as one (intrinsic or fma()); nothing
# else may be contracted, or the documented summation order would not hold.
foreach(src ${_gemm_sources})
  set_property(SOURCE ${src} APPEND PROPERTY COMPILE_OPTIONS -ffp-contract=off)
endforeach()

anvil_test(kernels_gemm_test SOURCES ${_gemm}/gemm_test.cc LIBS anvil_kernels
           LABELS every_tier)
anvil_test(kernels_gemm_fp8_test SOURCES ${_gemm}/gemm_fp8_test.cc LIBS anvil_kernels
           LABELS every_tier)
anvil_test(kernels_gemm_fp8_pack_test SOURCES ${_gemm}/gemm_fp8_pack_test.cc LIBS anvil_kernels
           LABELS every_tier)
anvil_test(kernels_gemm_int_test SOURCES ${_gemm}/gemm_int_test.cc LIBS anvil_kernels
           LABELS every_tier)
anvil_test(kernels_gemm_int_avxvnni_test SOURCES ${_gemm}/cpu/gemm_int_avxvnni_test.cc
           LIBS anvil_kernels LABELS every_tier)
# The integer GEMM's oracle rounds as the header defines: no contraction there either.
set_property(SOURCE ${_gemm}/gemm_int_test.cc APPEND PROPERTY COMPILE_OPTIONS -ffp-contract=off)
anvil_bench(kernels_gemm_bench SOURCES ${_gemm}/gemm_bench.cc LIBS anvil_kernels)
