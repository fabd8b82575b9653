# Row-wise kernel families (norm, rope, act, xent, embedding, optim, quant, exp_sums) and the
# shared SIMD wrapper cpu/simd.h. Each family: <family>.h (API), ref/ (double
# oracle), cpu/<family>.cc (checks, threads, portable tier) and one TU per ISA.
set(ANVIL_ROWWISE_DIR ${CMAKE_CURRENT_LIST_DIR})

# Compiled with -ffp-contract=off: GCC would otherwise fuse a*b + c into an FMA
# wherever it likes (even across intrinsics), so the written operation order,
# which the headers document and tests pin down, would not be the executed one.
function(anvil_rowwise_exact_fp)
  foreach(src ${ARGN})
    set_property(SOURCE ${src} APPEND PROPERTY COMPILE_OPTIONS -ffp-contract=off)
  endforeach()
endfunction()

# One family: cpu/<f>.cc, cpu/<f>_avx2.cc, cpu/<f>_avx512.cc in the library,
# <f>_test.cc as kernels_<f>_test and <f>_bench.cc as kernels_<f>_bench.
function(anvil_rowwise_family f)
  set(dir ${ANVIL_ROWWISE_DIR})
  set(srcs ${dir}/cpu/${f}.cc ${dir}/cpu/${f}_avx2.cc ${dir}/cpu/${f}_avx512.cc)
  target_sources(anvil_kernels PRIVATE ${srcs})
  anvil_isa_source(AVX2 ${dir}/cpu/${f}_avx2.cc)
  anvil_isa_source(AVX512 ${dir}/cpu/${f}_avx512.cc)
  anvil_rowwise_exact_fp(${srcs})
  anvil_test(kernels_${f}_test SOURCES ${dir}/${f}_test.cc LIBS anvil_kernels
             LABELS every_tier)
  anvil_bench(kernels_${f}_bench SOURCES ${dir}/${f}_bench.cc LIBS anvil_kernels)
endfunction()

# simd.h: tested per tier through a table of probe functions.
set(_simd_test_srcs ${ANVIL_ROWWISE_DIR}/cpu/simd_test.cc ${ANVIL_ROWWISE_DIR}/cpu/simd_test_avx2.cc
    ${ANVIL_ROWWISE_DIR}/cpu/simd_test_avx512.cc)
anvil_isa_source(AVX2 ${ANVIL_ROWWISE_DIR}/cpu/simd_test_avx2.cc)
anvil_isa_source(AVX512 ${ANVIL_ROWWISE_DIR}/cpu/simd_test_avx512.cc)
anvil_rowwise_exact_fp(${_simd_test_srcs})
anvil_test(kernels_simd_test SOURCES ${_simd_test_srcs} LIBS anvil_core LABELS every_tier)

anvil_rowwise_family(norm)       # RMSNorm
anvil_rowwise_family(rope)       # rotary position embedding
anvil_rowwise_family(act)        # SwiGLU
anvil_rowwise_family(xent)       # fused softmax cross-entropy
anvil_rowwise_family(embedding)  # token embedding gather / scatter-add
anvil_rowwise_family(optim)      # AdamW
anvil_rowwise_family(quant)      # FP8 amax, scales and casts (tensorwise, blockwise, MX)
anvil_rowwise_family(exp_sums)   # the sampler's softmax: e^x in double and running sums
# AdamW's test compares bitwise with a plain f32 loop, exp_sums' with the scalar
# restatement it includes: no contraction there either.
anvil_rowwise_exact_fp(${ANVIL_ROWWISE_DIR}/optim_test.cc ${ANVIL_ROWWISE_DIR}/exp_sums_test.cc)
