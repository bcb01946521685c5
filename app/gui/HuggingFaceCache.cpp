#include "app/gui/HuggingFaceCache.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <algorithm>

namespace pareto {

namespace {

bool hasWeights(const QDir& snapshot) {
  return snapshot.exists("config.json") &&
         (snapshot.exists("model.safetensors") || snapshot.exists("model.safetensors.index.json"));
}

QString readRef(const QString& repoDir) {
  QFile ref(repoDir + "/refs/main");
  if (!ref.open(QIODevice::ReadOnly)) return {};
  return QString::fromUtf8(ref.readAll()).trimmed();
}

}  // namespace

QString huggingFaceHubDir(const QProcessEnvironment& env) {
  if (env.contains("HF_HUB_CACHE") && !env.value("HF_HUB_CACHE").isEmpty()) return env.value("HF_HUB_CACHE");
  if (env.contains("HF_HOME") && !env.value("HF_HOME").isEmpty()) return env.value("HF_HOME") + "/hub";
  if (env.contains("XDG_CACHE_HOME") && !env.value("XDG_CACHE_HOME").isEmpty())
    return env.value("XDG_CACHE_HOME") + "/huggingface/hub";
  return env.value("HOME", QDir::homePath()) + "/.cache/huggingface/hub";
}

QList<CachedModel> discoverCachedModels(const QString& hubDir) {
  QList<CachedModel> models;
  const QDir hub(hubDir);
  if (!hub.exists()) return models;
  const QStringList repos = hub.entryList({"models--*"}, QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name);
  for (const QString& repoFolder : repos) {
    const QString repoDir = hub.filePath(repoFolder);
    // "models--org--name" → "org/name"; the first "--" after the prefix separates the owner.
    QString id = repoFolder.mid(QStringLiteral("models--").size());
    const int split = id.indexOf("--");
    if (split > 0) id = id.left(split) + "/" + id.mid(split + 2);

    const QDir snapshots(repoDir + "/snapshots");
    QString chosen;
    const QString main = readRef(repoDir);
    if (!main.isEmpty() && hasWeights(QDir(snapshots.filePath(main)))) {
      chosen = main;
    } else {
      // No usable "main": the newest complete snapshot.
      for (const QFileInfo& snap : snapshots.entryInfoList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Time)) {
        if (hasWeights(QDir(snap.absoluteFilePath()))) {
          chosen = snap.fileName();
          break;
        }
      }
    }
    if (chosen.isEmpty()) continue;
    models.append({id, chosen, QFileInfo(snapshots.filePath(chosen)).absoluteFilePath()});
  }
  std::sort(models.begin(), models.end(),
            [](const CachedModel& a, const CachedModel& b) { return a.repo.compare(b.repo, Qt::CaseInsensitive) < 0; });
  return models;
}

}  // namespace pareto
