// The "Recent models" list, most recent first, kept in QSettings so it survives restarts.
#pragma once

#include <QString>
#include <QStringList>

namespace pareto {

class RecentModels {
 public:
  static constexpr int kMaxEntries = 10;

  QStringList paths() const;
  void add(const QString& path);  // moves it to the front if already listed
  void remove(const QString& path);
  void clear();

 private:
  void store(const QStringList& paths);
};

}  // namespace pareto
