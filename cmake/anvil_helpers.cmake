# Helpers shared by the layer CMakeLists.

# anvil_test(NAME SOURCES... LIBS ...): a GoogleTest binary registered with CTest.
function(anvil_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  if(NOT ANVIL_BUILD_TESTS)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name})
  if(ARG_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()

# anvil_bench(NAME SOURCES... LIBS ...): a Google Benchmark binary (not a test).
function(anvil_bench name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  if(NOT ANVIL_BUILD_BENCH)
    return()
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} benchmark::benchmark)
endfunction()

# Compile one source for an instruction set it may use only after a run-time
# check. Each list starts from x86-64-v2, which overrides the build's -march
# (the `release` preset's native one too): a tier's file gets exactly its
# tier's instructions on every host, so the AVX2 tier run on an AVX-512 host
# (ANVIL_ISA=avx2, CI's second pass) is the code, and the register count, a
# real AVX2 CPU runs, not one the compiler widened with AVX-512's 32 vector
# registers and masks. Native builds keep tuning for the host.
if(ANVIL_NATIVE)
  set(_anvil_isa_base -march=x86-64-v2 -mtune=native)
else()
  set(_anvil_isa_base -march=x86-64-v2)
endif()
set(ANVIL_AVX512_FLAGS ${_anvil_isa_base} -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512bf16 -mavx512vnni -mfma -mavx2 -mf16c)
set(ANVIL_AVX512VBMI_FLAGS ${ANVIL_AVX512_FLAGS} -mavx512vbmi)
set(ANVIL_AMX_FLAGS ${ANVIL_AVX512_FLAGS} -mamx-tile -mamx-bf16 -mamx-int8)
set(ANVIL_AVX2_FLAGS ${_anvil_isa_base} -mavx2 -mfma -mf16c)
# The AVX2 tier's kernels that use AVX-VNNI where the CPU has it.
set(ANVIL_AVXVNNI_FLAGS ${ANVIL_AVX2_FLAGS} -mavxvnni)
# Such a file never joins a unity batch: its flags would reach the baseline
# files of the batch, and theirs would lose them. (CMake already leaves out
# files with COMPILE_OPTIONS; said here so that no later change relies on it.)
function(anvil_isa_source isa)
  foreach(src ${ARGN})
    set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${ANVIL_${isa}_FLAGS}"
                                                  SKIP_UNITY_BUILD_INCLUSION ON)
  endforeach()
endfunction()

# Called at the top of a layer's CMakeLists.txt whose loops run hot in the
# tests (kernels, and what feeds or surrounds them: core's conversions, comm's
# reductions, model, optim, parallel; profile, whose peak loops measure the
# machine): the targets of that directory, its own tests included (not those
# under tests/), get ANVIL_HOT_LAYER_FLAGS (debug-asan: -O1 over the preset's
# -O0).
macro(anvil_hot_layer)
  if(ANVIL_HOT_LAYER_FLAGS)
    separate_arguments(_anvil_hot_flags UNIX_COMMAND "${ANVIL_HOT_LAYER_FLAGS}")
    add_compile_options(${_anvil_hot_flags})
  endif()
endmacro()
