#include "compress/SparsityPattern.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "util/Error.h"

namespace pareto {
namespace {

std::string shortDecimal(double value) {
  std::ostringstream out;
  out.precision(6);
  out << value;
  return out.str();
}

bool parseInt(const std::string& text, int& value) {
  if (text.empty() || text.size() > 9) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  value = std::stoi(text);
  return true;
}

bool parseDouble(const std::string& text, double& value) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  return errno == 0 && end == text.c_str() + text.size();
}

std::string trimmed(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\n\r");
  if (first == std::string::npos) return {};
  const auto last = text.find_last_not_of(" \t\n\r");
  return text.substr(first, last - first + 1);
}

}  // namespace

SparsityPattern SparsityPattern::unstructured(double sparsity) {
  if (!std::isfinite(sparsity) || sparsity < 0 || sparsity >= 1)
    throw InputError("sparsity must be in [0, 1), got " + shortDecimal(sparsity));
  return SparsityPattern(sparsity, 0, 0);
}

SparsityPattern SparsityPattern::nm(int n, int m) {
  const std::string text = std::to_string(n) + ":" + std::to_string(m);
  if (m < 2 || m > 32 || 32 % m != 0)
    throw InputError("N:M pattern " + text + ": M must divide 32 (2, 4, 8, 16 or 32), got " + std::to_string(m));
  if (n < 1 || n >= m)
    throw InputError("N:M pattern " + text + ": N (weights kept per group) must be in [1, M), got " +
                     std::to_string(n));
  return SparsityPattern(1.0 - double(n) / double(m), n, m);
}

SparsityPattern SparsityPattern::parse(const std::string& rawText) {
  const std::string text = trimmed(rawText);
  const auto colon = text.find(':');
  if (colon != std::string::npos) {
    int n = 0, m = 0;
    if (!parseInt(text.substr(0, colon), n) || !parseInt(text.substr(colon + 1), m))
      throw InputError("sparsity pattern '" + rawText + "': expected N:M with integers, e.g. 2:4");
    return nm(n, m);
  }
  const bool percent = !text.empty() && text.back() == '%';
  double value = 0;
  if (!parseDouble(percent ? trimmed(text.substr(0, text.size() - 1)) : text, value))
    throw InputError("sparsity pattern '" + rawText + "': expected N:M (2:4), a percentage (50%) or a fraction (0.5)");
  if (percent) value /= 100.0;
  if (!std::isfinite(value) || value < 0 || value >= 1)
    throw InputError("sparsity pattern '" + rawText + "': sparsity must be in [0, 1) (0% to below 100%)");
  return unstructured(value);
}

double SparsityPattern::sparsity() const { return sparsity_; }

std::string SparsityPattern::label() const {
  if (isNM()) return std::to_string(n_) + ":" + std::to_string(m_);
  // Rounded to 1e-6 percent so that 0.3 prints as "30%", not "30.0000000000000004%".
  return shortDecimal(std::round(sparsity_ * 1e8) / 1e6) + "%";
}

void SparsityPattern::checkColumns(int64_t columns, const std::string& moduleName) const {
  if (isUnstructured() || columns % m_ == 0) return;
  const std::string who = moduleName.empty() ? std::string("weight") : "module '" + moduleName + "'";
  throw InputError(who + ": " + std::to_string(columns) + " input columns are not a multiple of M = " +
                   std::to_string(m_) + " for pattern " + label());
}

}  // namespace pareto
