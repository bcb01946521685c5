// Every caption of a form says what its field means: captions made by QFormLayout::addRow(text, field) get the
// field's tooltip, so hovering the words works like hovering the control.
#pragma once

class QWidget;

namespace pareto {

// For every QFormLayout under `root`: a caption without a tooltip takes its field's tooltip.
void shareTooltipsWithCaptions(QWidget* root);

}  // namespace pareto
