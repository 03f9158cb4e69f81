# Run at build time (POST_BUILD of a test binary, see attnscope_add_test in
# tests/CMakeLists.txt): lists the binary's GoogleTest cases and writes a
# CTest file with one test per test suite, "Suite.*", run as
# BINARY --gtest_filter=Suite.* (one process per suite instead of one per
# case). Inputs: TEST_EXECUTABLE, TEST_LABEL, TEST_WORKING_DIR, CTEST_FILE.
execute_process(
  COMMAND "${TEST_EXECUTABLE}" --gtest_list_tests
  WORKING_DIRECTORY "${TEST_WORKING_DIR}"
  OUTPUT_VARIABLE listing
  ERROR_VARIABLE errors
  RESULT_VARIABLE result
  TIMEOUT 60)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} --gtest_list_tests failed (${result}): ${errors}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(content "")
set(count 0)
foreach(line IN LISTS lines)
  # A suite's line is its name and a dot at the start of the line (a
  # parameterised suite's may carry "  # TypeParam = ..."); its cases are
  # indented below it.
  if(line MATCHES "^([A-Za-z_][A-Za-z0-9_/]*)\\.")
    set(name "${CMAKE_MATCH_1}.*")
    string(APPEND content
      "add_test([==[${name}]==] \"${TEST_EXECUTABLE}\" [==[--gtest_filter=${name}]==])\n"
      "set_tests_properties([==[${name}]==] PROPERTIES LABELS ${TEST_LABEL}"
      " WORKING_DIRECTORY \"${TEST_WORKING_DIR}\")\n")
    math(EXPR count "${count} + 1")
  endif()
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} lists no test suite")
endif()
file(WRITE "${CTEST_FILE}" "${content}")
