// Which weights a pruning method may remove: an unstructured fraction s of them, or N kept out of every M
// consecutive inputs (N:M). N:M groups run along the input dimension (the columns of W [out, in]) because that is
// the dimension a GEMV kernel walks per output; M must divide 32 so a group never straddles a 32-bit mask word.
#pragma once

#include <cstdint>
#include <string>

namespace pareto {

class SparsityPattern {
 public:
  // Unstructured sparsity s ∈ [0, 1): the fraction of weights removed. Throws InputError naming a bad value.
  static SparsityPattern unstructured(double sparsity);
  // N:M with 1 <= N < M, M <= 32 and M dividing 32 (1:4, 2:4, 4:8, 2:8, 8:16, 16:32, ...).
  static SparsityPattern nm(int n, int m);
  // "2:4" -> N:M; "50%" or "0.5" -> unstructured. Throws InputError quoting the text.
  static SparsityPattern parse(const std::string& text);

  bool isNM() const { return m_ != 0; }
  bool isUnstructured() const { return m_ == 0; }
  int n() const { return n_; }  // kept per group; 0 when unstructured
  int m() const { return m_; }  // group size; 0 when unstructured
  // Fraction removed: s, or 1 - N/M.
  double sparsity() const;
  // "2:4" or "50%" (shortest decimal form, e.g. "62.5%").
  std::string label() const;

  // Throws InputError (naming the module when given) if a weight with `columns` inputs cannot take the pattern:
  // N:M needs columns % M == 0.
  void checkColumns(int64_t columns, const std::string& moduleName = {}) const;

  bool operator==(const SparsityPattern& other) const {
    return n_ == other.n_ && m_ == other.m_ && sparsity_ == other.sparsity_;
  }
  bool operator!=(const SparsityPattern& other) const { return !(*this == other); }

 private:
  SparsityPattern(double sparsity, int n, int m) : sparsity_(sparsity), n_(n), m_(m) {}

  double sparsity_;
  int n_;
  int m_;
};

}  // namespace pareto
