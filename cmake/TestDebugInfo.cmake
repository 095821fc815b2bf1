# Tests and benchmarks keep only line tables and function names (-g1) in a RelWithDebInfo build:
# a failure or crash in them still gives a symbolized backtrace with lines, and their
# template-heavy units (GoogleTest, nlohmann_json) build about a quarter faster than with full
# -g. The runtime's programs and libraries keep the build type's full debug info.
function(smolbox_test_debug_info target)
  if(CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
    target_compile_options(${target} PRIVATE -g1)
  endif()
endfunction()
