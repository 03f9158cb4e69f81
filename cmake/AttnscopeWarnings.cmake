# attnscope_warnings: an INTERFACE target that our own targets link PRIVATE,
# so generated code (protobuf, gRPC) and third-party headers are exempt.
add_library(attnscope_warnings INTERFACE)
target_compile_options(attnscope_warnings INTERFACE -Wall -Wextra -Wpedantic
  -Wno-unused-parameter)
if(ATTNSCOPE_WARNINGS_AS_ERRORS)
  target_compile_options(attnscope_warnings INTERFACE -Werror)
endif()
if(ATTNSCOPE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
