#include "app/gui/SyntheticModel.h"

#include <QLocale>
#include <QObject>
#include <algorithm>

#include "checkpoint/ModelPresets.h"

namespace pareto {

QStringList syntheticModelNames() {
  QStringList names;
  for (const std::string& n : knownModelPresets()) names << QString::fromStdString(n);
  return names;
}

ModelSummary syntheticModelSummary(const QString& preset) { return summarizePreset(preset.toStdString()); }

QString describeSyntheticModel(const QString& preset) {
  const ModelConfig c = modelPreset(preset.toStdString());
  const double p = double(parameterCount(c));
  const QString count = p >= 1e9 ? QObject::tr("%1 B").arg(QLocale().toString(p / 1e9, 'f', 2))
                                 : QObject::tr("%1 M").arg(QLocale().toString(p / 1e6, 'f', 2));
  return QObject::tr("%1, %2 parameters, %3 layers")
      .arg(QString::fromStdString(c.architecture), count)
      .arg(c.numLayers);
}

}  // namespace pareto
