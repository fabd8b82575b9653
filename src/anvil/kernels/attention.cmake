# Attention (FlashAttention-2): dispatcher, one TU per tier over the shared
# templates in cpu/attention_impl.h, the test and the micro-benchmark.
set(_attn ${CMAKE_CURRENT_LIST_DIR})
set(_attn_tiers ${_attn}/cpu/attention_scalar.cc ${_attn}/cpu/attention_avx2.cc
    ${_attn}/cpu/attention_avx512.cc)
target_sources(anvil_kernels PRIVATE ${_attn}/cpu/attention.cc ${_attn_tiers})
anvil_isa_source(AVX2 ${_attn}/cpu/attention_avx2.cc)
anvil_isa_source(AVX512 ${_attn}/cpu/attention_avx512.cc)
# The written operation order is the executed one (no a*b + c contracted into
# an FMA behind our back): decode reproduces the forward's bits because both
# run the same chain per row, and the tests pin that down.
foreach(src ${_attn_tiers})
  set_property(SOURCE ${src} APPEND PROPERTY COMPILE_OPTIONS -ffp-contract=off)
endforeach()

anvil_test(kernels_attention_test SOURCES ${_attn}/attention_test.cc LIBS anvil_kernels
           LABELS every_tier)
anvil_bench(kernels_attention_bench SOURCES ${_attn}/attention_bench.cc LIBS anvil_kernels)
