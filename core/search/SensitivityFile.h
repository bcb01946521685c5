// A measured sensitivity table as a file (`pareto-cli search --table FILE`), so that searches under other budgets
// reuse one sensitivity pass. The file holds the table and what it was measured for: the model folder, the base's
// calibration block, skip list, candidates and refinement settings, and the compute dtype. A file measured for
// anything else is not used (and is replaced by the next measurement).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "search/SearchBase.h"
#include "search/Sensitivity.h"

namespace pareto {

// What a table depends on.
nlohmann::json sensitivityKey(const SearchBase& base, const std::string& modelDir, const std::string& dtype);

// Writes the measured table with its key (atomically).
void writeSensitivityTable(const std::string& path, const SensitivityTable& table, const nlohmann::json& key);

// The table in `path` when it exists and was measured for `key`; nullopt otherwise. Throws InputError naming the
// file when it exists but is not a sensitivity table.
std::optional<SensitivityTable> readSensitivityTable(const std::string& path, const nlohmann::json& key);

}  // namespace pareto
