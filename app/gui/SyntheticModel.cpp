#include "app/gui/SyntheticModel.h"

#include <QLocale>
#include <QObject>
#include <algorithm>

#include "model/ModelPresets.h"

namespace pareto {

QStringList syntheticModelNames() {
  QStringList names;
  for (const std::string& n : knownModelPresets()) names << QString::fromStdString(n);
  return names;
}

ModelSummary syntheticModelSummary(const QString& preset) {
  const ModelConfig c = modelPreset(preset.toStdString());
  ModelSummary s;
  s.path = "synthetic:" + preset.toStdString();
  s.architecture = c.architecture;
  s.modelType = c.modelType;
  // Storage as published; either 16-bit type takes 2 bytes per weight.
  s.dtype = c.torchDtype == "bfloat16" ? "BF16" : "F16";
  s.vocabSize = c.vocabSize;
  s.hiddenSize = c.hiddenSize;
  s.intermediateSize = c.intermediateSize;
  s.numLayers = c.numLayers;
  s.numHeads = c.numHeads;
  s.numKvHeads = c.numKvHeads;
  s.headDim = c.headDim;
  s.tiedEmbeddings = c.tieWordEmbeddings;
  for (const ConfigTensor& t : checkpointTensors(c)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    s.tensors.push_back({t.name, s.dtype, t.shape, uint64_t(n) * 2});
    s.bytes += uint64_t(n) * 2;
  }
  s.parameters = parameterCount(c);
  std::sort(s.tensors.begin(), s.tensors.end(),
            [](const TensorSummary& a, const TensorSummary& b) { return a.name < b.name; });   // as summarizeModel
  return s;
}

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
