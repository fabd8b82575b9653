# Included by the top-level CMakeLists.txt before the layers when ANVIL_FUZZ is
# on. The sanitizer and coverage flags themselves come from the `fuzz` preset
# (CMakePresets.json); this file checks the compiler and makes toml++ visible
# to the fuzzer.
if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  message(FATAL_ERROR "ANVIL_FUZZ needs clang (libFuzzer): use `cmake --preset fuzz`")
endif()

# Debian's toml++ is a prebuilt shared library, so its parser would run without
# coverage instrumentation and the config fuzzer would be blind inside it.
# Defining the imported target first, as a header-only library, makes
# find_package(tomlplusplus) in core keep it (its config only creates the
# target when missing): the same toml++ sources, compiled into anvil_core with
# the fuzz flags. Its internal asserts stay off, as in Debian's release build
# of the library: one (in parse_key) claims what the code after it checks and
# reports as a parse error (`[!]`), so with asserts on it would abort on bad
# input that the shipped library rejects cleanly.
find_path(ANVIL_TOMLPP_INCLUDE toml++/toml.h REQUIRED)
if(NOT TARGET tomlplusplus::tomlplusplus)
  add_library(tomlplusplus::tomlplusplus INTERFACE IMPORTED GLOBAL)
  set_target_properties(tomlplusplus::tomlplusplus PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${ANVIL_TOMLPP_INCLUDE}"
    INTERFACE_COMPILE_DEFINITIONS "TOML_HEADER_ONLY=1"
    INTERFACE_COMPILE_OPTIONS "-DTOML_ASSERT(expr)=static_assert(true)")
endif()
