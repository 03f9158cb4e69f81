// The Lens and Patch runs the dashboard draws, from events as the server
// sends them: a lens state in several pieces, attributions before the
// summary, patch steps in any order, steps outside the grid, NaN; and the
// diverging colour scale their grids use.
#include <QtTest>
#include <cmath>

#include "client/models/colors.h"
#include "client/models/dashboard_controller.h"
#include "client/models/lens_run.h"
#include "client/models/patch_run.h"
#include "tests/client/test_registry.h"

namespace attnscope::dashboard {
namespace {

namespace v1 = attnscope::v1;

v1::LensEvent lensPiece(int state, std::initializer_list<qint64> positions) {
  v1::LensEvent event;
  event.mutable_lens()->set_state(state);
  for (const qint64 position : positions) {
    v1::LensCell* cell = event.mutable_lens()->add_cells();
    cell->set_position(position);
    v1::NextTokenPrediction* top = cell->add_top();
    top->set_id(position + 10 * state);
    top->set_token("t" + std::to_string(state) + "_" + std::to_string(position));
    top->set_p(0.1 * state + 0.01 * double(position));
    cell->set_next_p(0.5);
    cell->set_next_rank(state);
    cell->set_entropy(1.25);
  }
  return event;
}

v1::PatchEvent patchStep(int layer, qint64 column, double recovery, qint64 done, qint64 total) {
  v1::PatchEvent event;
  v1::PatchStep* step = event.mutable_step();
  step->set_layer(layer);
  step->set_column(column);
  step->set_recovery(recovery);
  step->set_metric(2 * recovery);
  step->set_done(done);
  step->set_total(total);
  return event;
}

}  // namespace

class LensPatchRunsTest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void lensCellsArriveInPieces() {
    LensRun run;
    v1::LensEvent tokens;
    for (const char* t : {"The", " cat", " sat", " down"}) tokens.mutable_tokens()->add_texts(t);
    run.addEvent(tokens);
    QCOMPARE(run.tokenTexts().size(), 4);
    // Positions 1..3 read out; state 0 in two pieces, state 1 whole.
    run.addEvent(lensPiece(0, {1, 2}));
    run.addEvent(lensPiece(0, {3}));
    run.addEvent(lensPiece(1, {1, 2, 3}));
    QCOMPARE(run.states(), 2);
    QCOMPARE(run.positions(), (QVector<qint64>{1, 2, 3}));
    QCOMPARE(run.cellCount(), 6);
    const LensRun::Cell cell = run.cell(1, 2);  // state 1, position 3
    QVERIFY(cell.present);
    QCOMPARE(cell.topToken, QStringLiteral("t1_3"));
    QVERIFY(std::fabs(cell.topP - 0.13) <= 1e-12);
    QCOMPARE(cell.nextRank, qint64(1));
    QVERIFY(cell.tooltip.contains(QStringLiteral("t1_3")));
    QVERIFY(cell.tooltip.contains(QStringLiteral("rank 1")));
    QVERIFY(!run.cell(2, 0).present);   // no such state yet
    QVERIFY(!run.cell(0, 3).present);   // no such column
    QVERIFY(!run.finished());
  }

  void lensTopOfNoCellIsNaN() {
    LensRun run;
    v1::LensEvent event;
    event.mutable_lens()->set_state(0);
    event.mutable_lens()->add_cells()->set_position(0);
    run.addEvent(event);
    QVERIFY(run.cell(0, 0).present);
    QVERIFY(std::isnan(run.cell(0, 0).topP));
  }

  void attributionGridIsLayersByHeadsThenMlp() {
    LensRun run;
    v1::LensEvent event;
    v1::PositionAttribution* a = event.mutable_attribution();
    a->set_position(3);
    a->set_target_token(" mat");
    // 2 layers x 3 heads, layer-major; MLPs 0.5 and -4.
    for (const double h : {0.1, -0.2, 0.3, 1.0, -2.0, 3.0}) a->add_heads(h);
    a->add_mlp(0.5);
    a->add_mlp(-4.0);
    run.addEvent(event);
    QCOMPARE(run.numLayers(), 2);
    QCOMPARE(run.numHeads(), 3);
    const QVector<QVector<double>> grid = run.attributionGrid(0);
    QCOMPARE(grid.size(), 2);
    QCOMPARE(grid[0], (QVector<double>{0.1, -0.2, 0.3, 0.5}));
    QCOMPARE(grid[1], (QVector<double>{1.0, -2.0, 3.0, -4.0}));
    QVERIFY(std::fabs(run.attributionScale(0) - 4.0) <= 0.0);
    QVERIFY(run.attributionGrid(1).isEmpty());
    // A NaN contribution does not hide the scale.
    a->set_heads(0, std::nan(""));
    run.addEvent(event);
    QVERIFY(std::fabs(run.attributionScale(1) - 4.0) <= 0.0);
    v1::LensEvent summary;
    summary.mutable_summary()->set_num_layers(2);
    summary.mutable_summary()->set_num_heads(3);
    run.addEvent(summary);
    QVERIFY(run.finished());
  }

  void patchStepsFillTheGrid() {
    PatchRun run;
    QCOMPARE(run.rows(), 0);
    v1::PatchEvent baseline;
    v1::PatchBaseline* b = baseline.mutable_baseline();
    b->set_num_layers(2);
    b->set_num_columns(3);
    b->set_kind(v1::PATCH_KIND_HEADS);
    b->set_clean_metric(2.0);
    b->set_corrupted_metric(-1.0);
    run.addEvent(baseline);
    QVERIFY(run.hasBaseline());
    QCOMPARE(run.rows(), 2);
    QCOMPARE(run.columns(), 3);
    QVERIFY(std::isnan(run.recovery(1, 2)));
    run.addEvent(patchStep(1, 2, 0.75, 1, 6));
    run.addEvent(patchStep(0, 0, -0.25, 2, 6));
    run.addEvent(patchStep(2, 0, 9.0, 3, 6));   // outside the grid: ignored
    run.addEvent(patchStep(0, -1, 9.0, 3, 6));
    QVERIFY(std::fabs(run.recovery(1, 2) - 0.75) <= 0.0);
    QVERIFY(std::fabs(run.metric(1, 2) - 1.5) <= 0.0);
    QVERIFY(std::fabs(run.recovery(0, 0) + 0.25) <= 0.0);
    QVERIFY(std::isnan(run.recovery(0, 1)));
    QVERIFY(std::isnan(run.recovery(5, 5)));
    QCOMPARE(run.done(), qint64(3));
    QCOMPARE(run.total(), qint64(6));
    QCOMPARE(run.columnLabel(2), QStringLiteral("H2"));
    QCOMPARE(run.kindName(), QStringLiteral("heads"));
    QVERIFY(!run.finished());
    v1::PatchEvent summary;
    summary.mutable_summary()->set_passes(6);
    run.addEvent(summary);
    QVERIFY(run.finished());
  }

  void residualColumnsArePositions() {
    PatchRun run;
    v1::PatchEvent baseline;
    v1::PatchBaseline* b = baseline.mutable_baseline();
    b->set_num_layers(1);
    b->set_num_columns(2);
    b->set_kind(v1::PATCH_KIND_RESIDUAL);
    b->mutable_corrupted()->add_texts("The");
    b->mutable_corrupted()->add_texts(" Colosseum");
    run.addEvent(baseline);
    QCOMPARE(run.kindName(), QStringLiteral("residual"));
    QCOMPARE(run.columnLabel(1), QStringLiteral("1  Colosseum"));
  }

  void divergingColorEnds() {
    QCOMPARE(divergingColor(0.0), QColor(255, 255, 255));
    QCOMPARE(divergingColor(1.0), QColor(0xb2, 0x18, 0x2b));
    QCOMPARE(divergingColor(-1.0), QColor(0x21, 0x66, 0xac));
    QCOMPARE(divergingColor(7.0), divergingColor(1.0));    // clamped
    QCOMPARE(divergingColor(-7.0), divergingColor(-1.0));
    QCOMPARE(divergingColor(std::nan("")), QColor(0xd9, 0xd9, 0xd9));
    // Halfway is halfway to the end colour.
    QCOMPARE(divergingColor(0.5).red(), 217);  // 255 + (178 - 255) / 2 = 216.5
  }

  void lensAndPatchRequests() {
    v1::AnalyzeOptions options;
    options.set_precision("bf16");
    const QVector<qint64> few = {1, 2, 3};
    v1::LensRequest lens = lensRequest(QStringLiteral("m"), few, options);
    QCOMPARE(lens.ids().ids_size(), 3);
    QCOMPARE(QString::fromStdString(lens.lens_positions()), QStringLiteral("all"));
    QVERIFY(lens.logit_lens() && lens.attribution() && !lens.rollout());
    QCOMPARE(QString::fromStdString(lens.precision()), QStringLiteral("bf16"));
    QVector<qint64> many(kLensColumns + 44, 7);
    lens = lensRequest(QStringLiteral("m"), many, options);
    QCOMPARE(QString::fromStdString(lens.lens_positions()), QStringLiteral("44-299"));
    PatchInput input;
    input.clean.text = QStringLiteral("a b");
    input.corrupted.ids = {5, 6};
    input.residual = true;
    v1::PatchRequest patch = patchRequest(QStringLiteral("m"), input);
    QCOMPARE(QString::fromStdString(patch.clean_text()), QStringLiteral("a b"));
    QCOMPARE(patch.corrupted_ids().ids_size(), 2);
    QCOMPARE(patch.kind(), v1::PATCH_KIND_RESIDUAL);
    QVERIFY(patch.target_a_text().empty() && patch.target_b_text().empty());
    input.targetA = QStringLiteral(" Paris");
    input.targetB = QStringLiteral(" Rome");
    input.residual = false;
    patch = patchRequest(QStringLiteral("m"), input);
    QCOMPARE(QString::fromStdString(patch.target_a_text()), QStringLiteral(" Paris"));
    QCOMPARE(QString::fromStdString(patch.target_b_text()), QStringLiteral(" Rome"));
    QCOMPARE(patch.kind(), v1::PATCH_KIND_HEADS);
  }
};

ATTNSCOPE_REGISTER_TEST(LensPatchRunsTest)

}  // namespace attnscope::dashboard

#include "lens_patch_runs_test.moc"
