// Models already downloaded by Hugging Face tools (huggingface_hub, transformers), found in the hub cache:
//   <hub>/models--<org>--<name>/snapshots/<revision>/{config.json, model.safetensors[.index.json], ...}
// with <hub>/models--<org>--<name>/refs/main naming the revision "main" points at. The hub folder is
// $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub (the
// order huggingface_hub itself uses).
#pragma once

#include <QList>
#include <QProcessEnvironment>
#include <QString>

namespace pareto {

struct CachedModel {
  QString repo;       // "meta-llama/Llama-3.1-8B"
  QString revision;   // the snapshot folder's name (a commit hash)
  QString path;       // the snapshot folder, ready for openModel
};

QString huggingFaceHubDir(const QProcessEnvironment& env = QProcessEnvironment::systemEnvironment());

// Every model repository in the hub folder with a snapshot holding config.json and safetensors weights, one entry
// per repository (the revision refs/main names, else the most recently modified snapshot), sorted by name.
// A missing folder gives an empty list.
QList<CachedModel> discoverCachedModels(const QString& hubDir);

}  // namespace pareto
