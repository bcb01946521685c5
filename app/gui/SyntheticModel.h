// Synthetic models in the workbench: a published configuration (checkpoint/ModelPresets.h) with random weights,
// opened like a model so that the Recipe dock can estimate and the Benchmark action can measure the real
// architecture's speed without downloading it. Nothing here touches weights: the summary is made from the
// configuration alone (its tensors as a checkpoint of it would hold them, 2 bytes per weight).
#pragma once

#include <QString>
#include <QStringList>

#include "model/ModelSummary.h"

namespace pareto {

// The preset names, in checkpoint/ModelPresets.h order.
QStringList syntheticModelNames();

// What the Model dock shows for `preset`: architecture, parameters, size at 16 bits, the published torch_dtype
// as the storage type ("BF16", "F16"), the layer sizes and the tensor list. Path is "synthetic:<preset>", no
// files. Throws InputError for an unknown name (listing the known ones).
ModelSummary syntheticModelSummary(const QString& preset);

// One line for menus and tooltips: "LlamaForCausalLM, 8.03 B parameters, 32 layers".
QString describeSyntheticModel(const QString& preset);

}  // namespace pareto
