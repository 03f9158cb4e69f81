// What every fuzz target shares: a check that turns a broken contract into a
// crash libFuzzer records (with the input that caused it), and the paths of
// the fixtures the targets load once at start-up.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

// Aborts with `what` when `condition` is false. Used for the promises a
// parser's header makes about what it returns (ids within the vocabulary,
// spans within the text, ...): a sanitizer finds memory errors, this finds
// wrong answers.
#define FUZZ_CHECK(condition, what)                                                   \
  do {                                                                                \
    if (!(condition)) {                                                               \
      std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s (%s)\n", __FILE__, __LINE__, \
                   #condition, std::string(what).c_str());                            \
      std::abort();                                                                   \
    }                                                                                 \
  } while (false)

namespace attnscope::fuzz {

// tests/data and models/ of the source tree the target was built from.
inline std::string TestDataDir() { return ATTNSCOPE_TEST_DATA_DIR; }
inline std::string ModelsDir() { return ATTNSCOPE_MODELS_DIR; }

}  // namespace attnscope::fuzz
