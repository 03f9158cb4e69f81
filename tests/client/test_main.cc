// Runs every registered QtTest class; exits non-zero if any test failed.
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
  int failures = 0;
  for (const auto& factory : attnscope::dashboard::testing::registeredTests()) {
    const std::unique_ptr<QObject> test = factory();
    failures += QTest::qExec(test.get(), argc, argv);
  }
  return failures == 0 ? 0 : 1;
}
