#include "client/ui/prompt_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QEvent>
#include <QFontMetrics>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSpinBox>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>

#include "client/ui/color_bar.h"
#include "client/ui/entropy_chart.h"
#include "client/ui/heat_cell_delegate.h"
#include "client/ui/heatmap_view.h"
#include "client/ui/norm_chart.h"
#include "client/ui/prompt_summary_panel.h"
#include "client/ui/rotated_header_view.h"

namespace attnscope::dashboard {
namespace {

// The narrowest cell that still prints "0.00" legibly, and the smallest cell.
constexpr int kLabelledCellWidth = 36;
constexpr int kLabelledCellHeight = 18;
constexpr int kMinCell = 6;

}  // namespace

PromptView::PromptView(QWidget* parent)
    : QWidget(parent),
      m_heatmap(new HeatmapModel(this)),
      m_sinkGrid(new SinkGridModel(this)),
      m_norms(new NormBarsModel(this)),
      m_summary(new PromptSummaryPanel(this)),
      m_normChart(new NormChart(this)),
      m_entropyChart(new EntropyChart(this)),
      m_vertical(new QSplitter(Qt::Vertical, this)),
      m_grids(new QSplitter(Qt::Horizontal, this)),
      m_charts(new QSplitter(Qt::Horizontal, this)) {
  setObjectName(QStringLiteral("promptView"));
  m_vertical->setObjectName(QStringLiteral("promptSplitter"));
  m_grids->setObjectName(QStringLiteral("gridsSplitter"));
  m_charts->setObjectName(QStringLiteral("chartsSplitter"));
  m_grids->addWidget(buildHeatmapPanel());
  m_grids->addWidget(buildSinkGridPanel());
  m_grids->setStretchFactor(0, 3);
  m_grids->setStretchFactor(1, 2);
  m_grids->setSizes({600, 400});
  m_normChart->setNormModel(m_norms);
  m_charts->addWidget(m_normChart);
  m_charts->addWidget(m_entropyChart);
  m_charts->setStretchFactor(0, 1);
  m_charts->setStretchFactor(1, 1);
  m_charts->setSizes({500, 500});
  m_vertical->addWidget(m_grids);
  m_vertical->addWidget(m_charts);
  // The heatmap and the grid first: on a 720-px screen they get two thirds.
  m_vertical->setStretchFactor(0, 2);
  m_vertical->setStretchFactor(1, 1);
  m_vertical->setSizes({500, 400});
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(m_summary);
  layout->addWidget(m_vertical, 1);
  connect(m_heatmap, &HeatmapModel::headChanged, this, &PromptView::updateHeatmapCaption);
  connect(m_heatmap, &HeatmapModel::headChanged, this, &PromptView::headShown);
  updateColourScale();
}

QWidget* PromptView::buildHeatmapPanel() {
  auto* box = new QGroupBox(tr("Attention (rows: queries, columns: keys)"), this);
  m_layer = new QSpinBox(box);
  m_head = new QSpinBox(box);
  m_layer->setObjectName(QStringLiteral("layerSpin"));
  m_head->setObjectName(QStringLiteral("headSpin"));
  m_layer->setPrefix(tr("layer "));
  m_head->setPrefix(tr("head "));
  m_layer->setRange(0, 0);
  m_head->setRange(0, 0);
  m_heatmapCaption = new QLabel(box);
  m_heatmapCaption->setObjectName(QStringLiteral("heatmapCaption"));
  m_heatmapCaption->setWordWrap(true);  // never forces the panel wider
  m_heatmapView = new HeatmapView(box);
  m_heatmapView->setHeatmapModel(m_heatmap);
  m_scaleCombo = new QComboBox(box);
  m_scaleCombo->setObjectName(QStringLiteral("heatScaleCombo"));
  m_scaleCombo->setToolTip(tr("Colour scale: √ and log show the small weights of diffuse heads"));
  m_scaleCombo->addItem(tr("linear"), int(HeatScaleKind::Linear));
  m_scaleCombo->addItem(tr("√ weight"), int(HeatScaleKind::Sqrt));
  m_scaleCombo->addItem(tr("log"), int(HeatScaleKind::Log));
  m_rowNormalise = new QCheckBox(tr("per row"), box);
  m_rowNormalise->setObjectName(QStringLiteral("rowNormaliseCheck"));
  m_rowNormalise->setToolTip(tr("Divide each query's row by its largest weight"));
  m_heatmapLegend = new ColorBar(box);
  m_heatmapLegend->setObjectName(QStringLiteral("heatmapLegend"));
  auto* controls = new QHBoxLayout;
  controls->addWidget(m_layer);
  controls->addWidget(m_head);
  controls->addWidget(m_heatmapCaption, 1);
  auto* scale = new QHBoxLayout;
  scale->addWidget(m_scaleCombo);
  scale->addWidget(m_rowNormalise);
  scale->addWidget(m_heatmapLegend, 1);
  auto* layout = new QVBoxLayout(box);
  layout->addLayout(controls);
  layout->addWidget(m_heatmapView, 1);
  layout->addLayout(scale);
  connect(m_scaleCombo, &QComboBox::currentIndexChanged, this, [this] {
    m_heatmap->setScale(HeatScaleKind(m_scaleCombo->currentData().toInt()));
  });
  connect(m_rowNormalise, &QCheckBox::toggled, m_heatmap, &HeatmapModel::setRowNormalised);
  connect(m_heatmap, &HeatmapModel::scaleChanged, this, &PromptView::updateColourScale);
  const auto choose = [this] { m_heatmap->setHead(m_layer->value(), m_head->value()); };
  connect(m_layer, qOverload<int>(&QSpinBox::valueChanged), this, choose);
  connect(m_head, qOverload<int>(&QSpinBox::valueChanged), this, choose);
  return box;
}

QWidget* PromptView::buildSinkGridPanel() {
  auto* box = new QGroupBox(tr("Sink scores A[l,h,T-1,0], layer × head"), this);
  box->setToolTip(tr("Click a cell to open that head in the heatmap"));
  m_sinkGridView = new QTableView(box);
  m_sinkGridView->setObjectName(QStringLiteral("sinkGridView"));
  // Head numbers run upwards, so that even 32 narrow columns name each head.
  m_sinkGridView->setHorizontalHeader(new RotatedHeaderView(m_sinkGridView));
  m_sinkGridView->setModel(m_sinkGrid);
  m_sinkGridView->setItemDelegate(new HeatCellDelegate(m_sinkGridView));
  m_sinkGridView->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_sinkGridView->setSelectionMode(QAbstractItemView::SingleSelection);
  m_sinkGridView->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  m_sinkGridView->verticalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  m_sinkGridView->horizontalHeader()->setMinimumSectionSize(kMinCell);
  m_sinkGridView->verticalHeader()->setMinimumSectionSize(kMinCell);
  m_sinkGridView->setMouseTracking(true);  // tooltips carry the values of colour-only cells
  m_sinkGridView->installEventFilter(this);
  connect(m_sinkGrid, &QAbstractItemModel::rowsInserted, this, &PromptView::fitSinkGrid);
  connect(m_sinkGrid, &QAbstractItemModel::columnsInserted, this, &PromptView::fitSinkGrid);
  connect(m_sinkGrid, &QAbstractItemModel::modelReset, this, &PromptView::fitSinkGrid);
  m_sinkGridLegend = new ColorBar(box);
  m_sinkGridLegend->setObjectName(QStringLiteral("sinkGridLegend"));
  auto* layout = new QVBoxLayout(box);
  layout->addWidget(m_sinkGridView);
  layout->addWidget(m_sinkGridLegend);
  connect(m_sinkGridView, &QAbstractItemView::clicked, this,
          [this](const QModelIndex& index) { openHead(index.row(), index.column()); });
  return box;
}

bool PromptView::eventFilter(QObject* watched, QEvent* event) {
  if (watched == m_sinkGridView && event->type() == QEvent::Resize) fitSinkGrid();
  return QWidget::eventFilter(watched, event);
}

void PromptView::fitSinkGrid() {
  const int rows = m_sinkGrid->rowCount();
  const int columns = m_sinkGrid->columnCount();
  if (rows == 0 || columns == 0) return;
  QHeaderView* top = m_sinkGridView->horizontalHeader();
  QHeaderView* side = m_sinkGridView->verticalHeader();
  // The room the cells get once the row header is drawn (~3 characters).
  const int width = m_sinkGridView->width() - side->width() - 4;
  const int height = m_sinkGridView->height() - top->height() - 4;
  const bool labelled =
      width / columns >= kLabelledCellWidth && height / rows >= kLabelledCellHeight;
  m_sinkGrid->setLabelled(labelled);
  QFont font = m_sinkGridView->font();
  if (!labelled) font.setPointSizeF(qMax(6.0, font.pointSizeF() * 0.75));
  top->setFont(font);
  side->setFont(font);
  // The header's numbers run upwards: each needs a line's height of width.
  // Columns narrower than that name every step-th head.
  const int label = QFontMetrics(font).height();
  const int cell = qMax(1, width / columns);
  m_sinkGrid->setHeadLabelStep(labelled ? 1 : (label + cell - 1) / cell);
}

void PromptView::setAnalysis(PromptAnalysis* analysis) {
  m_analysis = analysis;
  m_heatmap->setAnalysis(analysis);
  m_sinkGrid->setAnalysis(analysis);
  m_norms->setAnalysis(analysis);
  m_summary->setAnalysis(analysis);
  connect(analysis, &PromptAnalysis::layerAdded, this, &PromptView::onLayerAdded);
  connect(analysis, &PromptAnalysis::cleared, this, [this] {
    m_entropyChart->setSeries(EntropySeries());
    setNote(QString());
    updateHeatmapCaption();
  });
  connect(analysis, &PromptAnalysis::attentionReady, this, &PromptView::updateHeatmapCaption);
  updateHeatmapCaption();
}

void PromptView::onLayerAdded() {
  m_layer->setRange(0, qMax(0, m_analysis->layerCount() - 1));
  m_head->setRange(0, qMax(0, m_analysis->headCount() - 1));
}

void PromptView::openHead(int layer, int head) {
  if (layer < 0 || head < 0) return;
  m_layer->setMaximum(qMax(m_layer->maximum(), layer));
  m_head->setMaximum(qMax(m_head->maximum(), head));
  const QSignalBlocker blockLayer(m_layer);
  const QSignalBlocker blockHead(m_head);
  m_layer->setValue(layer);
  m_head->setValue(head);
  m_heatmap->setHead(layer, head);
  m_sinkGridView->setCurrentIndex(m_sinkGrid->index(layer, head));
}

void PromptView::updateHeatmapCaption() {
  QString caption;
  if (m_analysis != nullptr && m_analysis->tokenCount() > 0) {
    const attnscope::v1::LayerStats* stats = m_analysis->layer(m_heatmap->layer());
    const int head = m_heatmap->head();
    // The hover hint is the caption's tooltip: on a small screen the
    // caption keeps to a line or two above the heatmap.
    caption = m_heatmap->hasWeights() ? QString() : tr("waiting for weights…");
    m_heatmapCaption->setToolTip(m_heatmap->hasWeights()
                                     ? tr("Hover a row of the heatmap: what that token reads")
                                     : QString());
    if (stats != nullptr && head < stats->sink_score_size()) {
      caption =
          tr("sink %1 · entropy %2 nats · prev-token %3%4")
              .arg(stats->sink_score(head), 0, 'f', 2)
              .arg(head < stats->attention_entropy_size() ? stats->attention_entropy(head) : 0.0, 0,
                   'f', 2)
              .arg(head < stats->prev_token_score_size() ? stats->prev_token_score(head) : 0.0, 0,
                   'f', 2)
              .arg(caption.isEmpty() ? QString() : QStringLiteral(" — ") + caption);
    }
  }
  m_heatmapCaption->setText(caption);
}

void PromptView::updateColourScale() {
  // One colour scale for both grids: the sink grid's small scores of long
  // prompts show under √ and log as the heatmap's weights do.
  m_sinkGrid->setScale(m_heatmap->scale());
  m_sinkGrid->setRowNormalised(m_heatmap->isRowNormalised());
  m_sinkGridLegend->setScale(m_heatmap->scale());
  m_sinkGridLegend->setCaption(m_heatmap->isRowNormalised() ? tr("sink / layer peak")
                                                            : tr("sink score"));
  m_heatmapLegend->setScale(m_heatmap->scale());
  m_heatmapLegend->setCaption(m_heatmap->isRowNormalised() ? tr("weight / row peak")
                                                           : tr("weight"));
}

void PromptView::setEntropy(const EntropySeries& series) { m_entropyChart->setSeries(series); }

void PromptView::setNote(const QString& note, bool isError) { m_summary->setNote(note, isError); }

}  // namespace attnscope::dashboard
