#include "app/gui/RecentModels.h"

#include <QSettings>

namespace pareto {

namespace {
const char* kKey = "recentModels";
}

QStringList RecentModels::paths() const { return QSettings().value(kKey).toStringList(); }

void RecentModels::add(const QString& path) {
  QStringList list = paths();
  list.removeAll(path);
  list.prepend(path);
  while (list.size() > kMaxEntries) list.removeLast();
  store(list);
}

void RecentModels::remove(const QString& path) {
  QStringList list = paths();
  list.removeAll(path);
  store(list);
}

void RecentModels::clear() { store({}); }

void RecentModels::store(const QStringList& list) {
  QSettings settings;
  settings.setValue(kKey, list);
}

}  // namespace pareto
