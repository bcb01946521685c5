#include "widgets/FormCaptions.h"

#include <QFormLayout>
#include <QLayoutItem>
#include <QWidget>

namespace pareto {

void shareTooltipsWithCaptions(QWidget* root) {
  for (QFormLayout* form : root->findChildren<QFormLayout*>()) {
    for (int row = 0; row < form->rowCount(); ++row) {
      QLayoutItem* label = form->itemAt(row, QFormLayout::LabelRole);
      QLayoutItem* field = form->itemAt(row, QFormLayout::FieldRole);
      if (label == nullptr || field == nullptr || label->widget() == nullptr) continue;
      QWidget* fieldWidget = field->widget();
      QString tip = fieldWidget ? fieldWidget->toolTip() : QString();
      // A field that is a layout (a line edit with its Browse button): the first tooltip inside it.
      if (tip.isEmpty() && field->layout() != nullptr)
        for (int i = 0; i < field->layout()->count() && tip.isEmpty(); ++i)
          if (QWidget* w = field->layout()->itemAt(i)->widget()) tip = w->toolTip();
      if (tip.isEmpty() && fieldWidget != nullptr)
        for (QWidget* w : fieldWidget->findChildren<QWidget*>())
          if (!w->toolTip().isEmpty()) {
            tip = w->toolTip();
            break;
          }
      if (label->widget()->toolTip().isEmpty()) label->widget()->setToolTip(tip);
    }
  }
}

}  // namespace pareto
