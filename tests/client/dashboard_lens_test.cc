// The Lens and Patching tabs of the real MainWindow against the real
// attnscope-server (the bundled model): the lens of the shown prompt and a
// patching run sent from the tab draw exactly what the Lens and Patch RPCs
// return to a plain gRPC client, every cell; a run with nothing shown or
// with prompts of different lengths says why and the next run works.
// Screenshots: <build dir>/test-output/dashboard-lens.png and
// dashboard-patch.png.
#include <grpcpp/grpcpp.h>

#include <QDir>
#include <QSettings>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QtTest>
#include <chrono>
#include <cmath>

#include "attnscope/v1/attnscope.grpc.pb.h"
#include "client/models/colors.h"
#include "client/models/lens_run.h"
#include "client/models/patch_run.h"
#include "client/ui/lens_view.h"
#include "client/ui/main_window.h"
#include "client/ui/patch_view.h"
#include "client/ui/value_grid.h"
#include "tests/client/server_process.h"
#include "tests/client/window_test_support.h"

namespace attnscope::dashboard {

namespace v1 = attnscope::v1;
using testing::ServerProcess;

namespace {

constexpr int kLong = 120000;  // ms: a model load and passes on a busy 2-core machine
const char kPrompt[] = "The quick brown fox jumps over the lazy dog because it was bored";
const char kClean[] = "The Eiffel Tower is in the city of";
const char kCorrupted[] = "The Colosseum is in the city of";

using testing::fastReconnect;

// False for NaN on either side.
bool within(double a, double b, double tolerance) { return std::fabs(a - b) <= tolerance; }

QString outputDir() {
  const QString dir = QStringLiteral(ATTNSCOPE_TEST_OUTPUT_DIR);
  QDir().mkpath(dir);
  return dir;
}

}  // namespace

class DashboardLensTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    QVERIFY(testing::useTestSettings(m_settingsDir, QStringLiteral("dashboard-lens")));
    QVERIFY2(m_server.start(0, kLong), qPrintable(m_server.error()));
    m_stub = v1::Analyzer::NewStub(grpc::CreateChannel(m_server.address().toStdString(),
                                                       grpc::InsecureChannelCredentials()));
  }

  void lensOfTheShownPromptIsTheRpcs() {
    MainWindow window(m_server.address(), fastReconnect());
    window.resize(1600, 1000);
    window.show();
    QTRY_COMPARE_WITH_TIMEOUT(window.connectionState(), Connection::State::Connected, kLong);
    LensView* view = window.lensView();
    QVERIFY(view != nullptr);

    // Nothing shown yet: the tab says why and sends nothing.
    QTest::mouseClick(view->runButton(), Qt::LeftButton);
    QCOMPARE(window.detailTabs()->currentWidget(), static_cast<QWidget*>(view));
    QVERIFY2(view->note().contains(QStringLiteral("No prompt is shown")), qPrintable(view->note()));
    QVERIFY(!window.controller()->lensRunning());

    window.analyzePrompt(QString::fromUtf8(kPrompt));
    QTRY_VERIFY_WITH_TIMEOUT(window.analysis()->isComplete(), kLong);
    const QVector<qint64> ids = window.controller()->shownIds();
    QVERIFY(ids.size() > 8);

    QTest::mouseClick(view->runButton(), Qt::LeftButton);
    QVERIFY(window.controller()->lensRunning());
    QTRY_VERIFY_WITH_TIMEOUT(view->run().finished(), kLong);
    QTRY_VERIFY_WITH_TIMEOUT(!window.controller()->lensRunning(), 5000);
    QVERIFY2(view->note().startsWith(QStringLiteral("Logit lens of")), qPrintable(view->note()));

    // The same request from a plain client.
    LensRun reference;
    {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
      auto reader = m_stub->Lens(
          &context, lensRequest(QString(), ids, window.controller()->shownOptions()));
      v1::LensEvent event;
      while (reader->Read(&event)) reference.addEvent(event);
      const grpc::Status status = reader->Finish();
      QVERIFY2(status.ok(), status.error_message().c_str());
    }
    const LensRun& shown = view->run();
    const int layers = shown.numLayers();
    QVERIFY(layers > 0);
    QCOMPARE(shown.states(), layers + 1);  // the embeddings, then every layer
    QCOMPARE(shown.states(), reference.states());
    QCOMPARE(shown.positions(), reference.positions());
    QCOMPARE(int(shown.positions().size()), int(ids.size()));  // every position (T <= 256)
    ValueGrid* grid = view->lensGrid();
    QCOMPARE(grid->rows(), shown.states());
    QCOMPARE(grid->columns(), int(ids.size()));
    QCOMPARE(grid->filledCells(), shown.states() * int(ids.size()));
    for (int s = 0; s < shown.states(); ++s) {
      for (int c = 0; c < int(ids.size()); ++c) {
        const LensRun::Cell a = shown.cell(s, c);
        const LensRun::Cell b = reference.cell(s, c);
        QVERIFY(a.present && b.present);
        QCOMPARE(a.topToken, b.topToken);
        QVERIFY2(within(a.topP, b.topP, 1e-12), qPrintable(QStringLiteral("state %1 column %2").arg(s).arg(c)));
        QCOMPARE(grid->cell(s, c).color, heatColor(b.topP));
        QCOMPARE(grid->cell(s, c).tooltip, b.tooltip);
      }
    }
    // Direct logit attribution at the last position: layers x (heads + MLP).
    QCOMPARE(shown.attributions().size(), 1);
    QCOMPARE(reference.attributions().size(), 1);
    const v1::PositionAttribution& a = shown.attributions().first();
    QCOMPARE(a.position(), qint64(ids.size() - 1));
    ValueGrid* dla = view->attributionGrid();
    QCOMPARE(dla->rows(), layers);
    QCOMPARE(dla->columns(), shown.numHeads() + 1);
    const QVector<QVector<double>> values = reference.attributionGrid(0);
    double sum = a.embedding() + a.offset();
    for (const double b : a.attention_bias()) sum += b;
    for (int l = 0; l < layers; ++l) {
      for (int c = 0; c <= shown.numHeads(); ++c) {
        QVERIFY(within(shown.attributionGrid(0)[l][c], values[l][c], 1e-12));
        QCOMPARE(dla->cell(l, c).text, QString::number(values[l][c], 'f', 2));
        sum += values[l][c];
      }
    }
    // The cells and the terms outside the grid add up to the total.
    QVERIFY2(within(sum, a.total(), 1e-4 * std::max(1.0, std::fabs(a.total()))),
             qPrintable(QStringLiteral("%1 vs %2").arg(sum).arg(a.total())));
    QVERIFY(view->attributionCaption().contains(QString::fromStdString(a.target_token())));
    QTest::qWait(200);
    QVERIFY(window.grab().toImage().save(outputDir() + QStringLiteral("/dashboard-lens.png")));
  }

  void patchingRunIsTheRpcs() {
    MainWindow window(m_server.address(), fastReconnect());
    window.resize(1600, 1000);
    window.show();
    QTRY_COMPARE_WITH_TIMEOUT(window.connectionState(), Connection::State::Connected, kLong);
    PatchView* view = window.patchView();
    window.detailTabs()->setCurrentWidget(view);

    // Prompts of different token lengths: refused by the server, said in
    // the tab, and the next run works.
    view->cleanEdit()->setText(QString::fromUtf8(kClean));
    view->corruptedEdit()->setText(QStringLiteral("Rome"));
    QTest::mouseClick(view->runButton(), Qt::LeftButton);
    QTRY_VERIFY_WITH_TIMEOUT(view->note().startsWith(QStringLiteral("Patch failed")), kLong);
    QVERIFY2(view->note().contains(QStringLiteral("INVALID_ARGUMENT")), qPrintable(view->note()));
    QCOMPARE(view->grid()->filledCells(), 0);

    view->corruptedEdit()->setText(QString::fromUtf8(kCorrupted));
    view->targetAEdit()->setText(QStringLiteral(" Paris"));
    view->targetBEdit()->setText(QStringLiteral(" Rome"));
    QTest::mouseClick(view->runButton(), Qt::LeftButton);
    QVERIFY(window.controller()->patchRunning());
    QTRY_VERIFY_WITH_TIMEOUT(view->run().finished(), kLong);
    QTRY_VERIFY_WITH_TIMEOUT(!window.controller()->patchRunning(), 5000);

    PatchInput input;
    input.clean.text = QString::fromUtf8(kClean);
    input.corrupted.text = QString::fromUtf8(kCorrupted);
    input.targetA = QStringLiteral(" Paris");
    input.targetB = QStringLiteral(" Rome");
    PatchRun reference;
    {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
      auto reader = m_stub->Patch(&context, patchRequest(QString(), input));
      v1::PatchEvent event;
      while (reader->Read(&event)) reference.addEvent(event);
      const grpc::Status status = reader->Finish();
      QVERIFY2(status.ok(), status.error_message().c_str());
    }
    const PatchRun& shown = view->run();
    QVERIFY(shown.rows() > 0 && shown.columns() > 0);
    QCOMPARE(shown.rows(), reference.rows());
    QCOMPARE(shown.columns(), reference.columns());
    QCOMPARE(shown.done(), qint64(shown.rows()) * shown.columns());
    QCOMPARE(shown.baseline().target_a_token(), std::string(" Paris"));
    QCOMPARE(view->grid()->filledCells(), shown.rows() * shown.columns());
    for (int l = 0; l < shown.rows(); ++l) {
      for (int c = 0; c < shown.columns(); ++c) {
        QVERIFY2(within(shown.recovery(l, c), reference.recovery(l, c), 1e-12),
                 qPrintable(QStringLiteral("layer %1 head %2").arg(l).arg(c)));
        QCOMPARE(view->grid()->cell(l, c).color, divergingColor(reference.recovery(l, c)));
      }
    }
    const QString progress = view->progressText();
    QVERIFY2(progress.contains(QStringLiteral("%1 of %1 passes (done)").arg(shown.done())),
             qPrintable(progress));
    QVERIFY2(view->note().startsWith(QStringLiteral("%1 patched passes of").arg(shown.done())),
             qPrintable(view->note()));
    QTest::qWait(200);
    QVERIFY(window.grab().toImage().save(outputDir() + QStringLiteral("/dashboard-patch.png")));
  }

 private:
  QTemporaryDir m_settingsDir;
  ServerProcess m_server;
  std::unique_ptr<v1::Analyzer::Stub> m_stub;
};

}  // namespace attnscope::dashboard

QTEST_MAIN(attnscope::dashboard::DashboardLensTest)
#include "dashboard_lens_test.moc"
