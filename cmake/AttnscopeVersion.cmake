# The version every binary prints for --version: the project version and the
# git revision of the source tree, both fixed when CMake configures (a build
# of a later commit reconfigures only if CMake runs again; the revision then
# says "-dirty" when tracked files had uncommitted changes at that time).
find_package(Git QUIET)
set(ATTNSCOPE_GIT_REVISION "unknown")
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} rev-parse --short=12 HEAD
                  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
                  OUTPUT_VARIABLE _rev OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE _rev_rc ERROR_QUIET)
  if(_rev_rc EQUAL 0 AND _rev)
    set(ATTNSCOPE_GIT_REVISION "${_rev}")
    execute_process(COMMAND ${GIT_EXECUTABLE} diff --quiet HEAD --
                    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
                    RESULT_VARIABLE _dirty ERROR_QUIET)
    if(NOT _dirty EQUAL 0)
      set(ATTNSCOPE_GIT_REVISION "${ATTNSCOPE_GIT_REVISION}-dirty")
    endif()
  endif()
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/attnscope_version.h.in
               ${CMAKE_BINARY_DIR}/generated/attnscope_version.h @ONLY)
# Header-only: #include "attnscope_version.h" for kAttnscopeVersion and
# kAttnscopeGitRevision.
add_library(attnscope_version INTERFACE)
target_include_directories(attnscope_version INTERFACE ${CMAKE_BINARY_DIR}/generated)
