#include "widgets/DisplayFormat.h"

#include <QLocale>

namespace pareto::display {

QString bytes(uint64_t n) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  if (n < 1024) return QString("%1 B").arg(n);
  double value = static_cast<double>(n);
  int unit = 0;
  while (value >= 1024.0 && unit < 4) {
    value /= 1024.0;
    ++unit;
  }
  return QStringLiteral("%1 %2").arg(QLocale().toString(value, 'f', 2), QString::fromLatin1(units[unit]));
}

QString duration(double seconds) {
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  if (s < 60) return QStringLiteral("%1 s").arg(s);
  if (s < 3600) return QStringLiteral("%1 min %2 s").arg(s / 60).arg(s % 60, 2, 10, QLatin1Char('0'));
  return QStringLiteral("%1 h %2 min").arg(s / 3600).arg((s % 3600) / 60, 2, 10, QLatin1Char('0'));
}

QString integer(int64_t n) { return QLocale().toString(static_cast<qlonglong>(n)); }

QString count(int64_t n) {
  static const struct {
    double scale;
    const char* suffix;
  } magnitudes[] = {{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "K"}};
  for (const auto& m : magnitudes) {
    if (static_cast<double>(n) >= m.scale)
      return QStringLiteral("%1 %2 (%3)")
          .arg(QLocale().toString(static_cast<double>(n) / m.scale, 'f', 2), QString::fromLatin1(m.suffix),
               integer(n));
  }
  return integer(n);
}

QString shape(const std::vector<int64_t>& dims) {
  QStringList parts;
  for (int64_t d : dims) parts << QString::number(d);
  return "[" + parts.join(", ") + "]";
}

QString naturalSortKey(const QString& text) {
  // Digit runs are left-padded to a fixed width so that plain string comparison orders them by value.
  constexpr int kWidth = 20;
  QString key;
  key.reserve(text.size() + 16);
  for (int i = 0; i < text.size();) {
    if (!text[i].isDigit()) {
      key += text[i++];
      continue;
    }
    int start = i;
    while (i < text.size() && text[i].isDigit()) ++i;
    QString digits = text.mid(start, i - start);
    key += QString(qMax(0, kWidth - digits.size()), QLatin1Char('0')) + digits;
  }
  return key;
}

}  // namespace pareto::display
