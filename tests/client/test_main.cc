// Runs every registered QtTest class; exits non-zero if any test failed or
// if no test class was registered (a binary that tests nothing must not pass).
// Needs a QGuiApplication (fonts, colours) but no display: CTest sets
// QT_QPA_PLATFORM=offscreen.
#include <QGuiApplication>
#include <QtTest>

#include "tests/client/test_registry.h"

namespace attnscope::dashboard::testing {

std::vector<TestFactory>& registeredTests() {
  static std::vector<TestFactory> tests;
  return tests;
}

}  // namespace attnscope::dashboard::testing

int main(int argc, char** argv) {
  QGuiApplication app(argc, argv);
  const auto& tests = attnscope::dashboard::testing::registeredTests();
  if (tests.empty()) {
    qCritical("no QtTest class is registered in this binary (ATTNSCOPE_REGISTER_TEST missing?)");
    return 1;
  }
  int failures = 0;
  for (const auto& factory : tests) {
    const std::unique_ptr<QObject> test = factory();
    failures += QTest::qExec(test.get(), argc, argv);
  }
  return failures == 0 ? 0 : 1;
}
