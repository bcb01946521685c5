// How numbers from the engine read on screen: sizes in binary units, counts with their magnitude, shapes as
// lists. One place so every widget says "15.73 M" and "30.00 MiB" the same way.
#pragma once

#include <QString>
#include <cstdint>
#include <string>
#include <vector>

namespace pareto::display {

QString bytes(uint64_t n);                         // "30.00 MiB", "512 B"
QString count(int64_t n);                          // "15.73 M (15,728,640)" in the current locale
QString integer(int64_t n);                        // "8,192" in the current locale
QString shape(const std::vector<int64_t>& shape);  // "[8192, 384]"
QString duration(double seconds);                  // "42 s", "3 min 05 s", "1 h 02 min"

// A key that sorts names with embedded numbers naturally: "layers.2" before "layers.10".
QString naturalSortKey(const QString& text);

}  // namespace pareto::display
