// Several QtTest classes in one binary (one binary per library): each test
// file registers its class, and test_main.cc runs them all in turn.
#pragma once

#include <QObject>
#include <functional>
#include <memory>
#include <vector>

namespace attnscope::dashboard::testing {

using TestFactory = std::function<std::unique_ptr<QObject>()>;

// The registered test classes, in registration order.
std::vector<TestFactory>& registeredTests();

struct TestRegistration {
  explicit TestRegistration(TestFactory factory) {
    registeredTests().push_back(std::move(factory));
  }
};

}  // namespace attnscope::dashboard::testing

#define ATTNSCOPE_REGISTER_TEST(Class)                                             \
  static const ::attnscope::dashboard::testing::TestRegistration kRegister##Class( \
      [] { return std::unique_ptr<QObject>(new Class); });
