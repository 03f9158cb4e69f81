# attnscope_warnings: an INTERFACE target that our own targets link PRIVATE,
# so generated code (protobuf, gRPC) and third-party headers are exempt.
add_library(attnscope_warnings INTERFACE)
target_compile_options(attnscope_warnings INTERFACE -Wall -Wextra -Wpedantic
  -Wno-unused-parameter)
if(ATTNSCOPE_WARNINGS_AS_ERRORS)
  target_compile_options(attnscope_warnings INTERFACE -Werror)
endif()
# Sanitizers apply to every target (generated code too), so that what our code
# hands to protobuf or gRPC is checked on both sides. UBSan recovers at compile
# time; UBSAN_OPTIONS=halt_on_error=1 (scripts/sanitize.sh) makes a report fail
# the test while leaving suppressions possible.
if(ATTNSCOPE_FUZZ)
  # libFuzzer's coverage in every object; the fuzz targets themselves link
  # -fsanitize=fuzzer (tests/fuzz). A UBSan report is a crash for libFuzzer.
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "ATTNSCOPE_FUZZ needs clang (libFuzzer): configure with "
                        "-DCMAKE_CXX_COMPILER=clang++-14 (scripts/fuzz.sh does)")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined
    -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
elseif(ATTNSCOPE_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(ATTNSCOPE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
# The sanitizer builds compile at -O1 with line tables only (-g1, after the
# build type's -O2 -g, so they win): stack traces keep file:line, and the
# libtorch translation units compile faster and smaller than at -O2 -g, which
# helps both suites fit CI's time (docs/testing.md "Sanitizers").
if(ATTNSCOPE_SANITIZE AND NOT ATTNSCOPE_FUZZ)
  add_compile_options(-O1 -g1)
endif()
