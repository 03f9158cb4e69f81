# The version every binary prints for --version and the build-info metric
# reports: the project version and the git revision of the source tree.
# The header is rewritten at build time (cmake/write_build_info.cmake) and only
# when its text changes, so a commit updates the revision without a
# reconfigure and an unchanged tree rebuilds nothing. The revision says
# "-dirty" when tracked files had uncommitted changes at build time.
set(ATTNSCOPE_VERSION_HEADER ${CMAKE_BINARY_DIR}/generated/attnscope_version.h)
add_custom_target(attnscope_version_header
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DVERSION=${PROJECT_VERSION}
          -DOUTPUT=${ATTNSCOPE_VERSION_HEADER} -P ${PROJECT_SOURCE_DIR}/cmake/write_build_info.cmake
  BYPRODUCTS ${ATTNSCOPE_VERSION_HEADER}
  COMMENT "attnscope version header (version, git revision)")
# Header-only: #include "attnscope_version.h" for kAttnscopeVersion and
# kAttnscopeGitRevision.
add_library(attnscope_version INTERFACE)
add_dependencies(attnscope_version attnscope_version_header)
target_include_directories(attnscope_version INTERFACE ${CMAKE_BINARY_DIR}/generated)
