#include "model/OutOfMemory.h"

#include <unistd.h>

#include <c10/util/Exception.h>

#include <cstdio>
#include <new>
#include <regex>
#include <stdexcept>

namespace pareto {
namespace {

std::string humanBytes(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) {
    bytes /= 1024;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

// The amount from LibTorch's messages: "Tried to allocate 20.00 MiB" (CUDA caching allocator) or "you tried to
// allocate 1099511627776 bytes" (CPU allocator); "" when absent.
std::string requestedAmount(const std::string& message) {
  static const std::regex amount(R"((?:[Tt]ried|[Tt]rying) to allocate ([0-9]+(?:\.[0-9]+)? ?(?:[KMGTPE]i?B|bytes?|B)))");
  std::smatch m;
  if (!std::regex_search(message, m, amount)) return "";
  const std::string text = m[1].str();
  static const std::regex plainBytes(R"(([0-9]+) ?bytes?)");
  std::smatch b;
  if (std::regex_match(text, b, plainBytes)) return humanBytes(std::stod(b[1].str()));
  return text;
}

bool looksLikeAllocationFailure(const std::string& message) {
  for (const char* marker : {"out of memory", "can't allocate memory", "not enough memory", "Out of Memory"})
    if (message.find(marker) != std::string::npos) return true;
  return false;
}

std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

[[noreturn]] void throwOutOfMemory(const std::string& stage, const std::string& hint, const std::string& detail) {
  const std::string requested = requestedAmount(detail);
  std::string message = stage + ": out of memory";
  message += requested.empty() ? std::string(" (the allocator did not say how much was asked for)")
                               : " asking for " + requested;
  if (!hint.empty()) message += "; " + hint;
  if (!detail.empty()) message += " [" + firstLine(detail) + "]";
  throw OutOfMemory(stage, requested, message);
}

}  // namespace

void rethrowAsOutOfMemory(const std::string& stage, const std::string& hint) {
  try {
    throw;
  } catch (const OutOfMemory& e) {
    // Already named by an inner stage (generation inside calibration): keep its text, add the outer stage.
    const std::string what = e.what();
    throw OutOfMemory(stage + " / " + e.stage(), e.requested(), stage + " / " + what);
  } catch (const c10::OutOfMemoryError& e) {
    throwOutOfMemory(stage, hint, e.what_without_backtrace());
  } catch (const c10::Error& e) {
    const std::string message = e.what_without_backtrace();
    if (!looksLikeAllocationFailure(message)) throw;
    throwOutOfMemory(stage, hint, message);
  } catch (const std::bad_alloc&) {
    throwOutOfMemory(stage, hint, "");
  } catch (const std::runtime_error& e) {
    // Some LibTorch builds (Debian's 1.13 among them, for part of ATen) throw plain runtime_errors.
    const std::string message = e.what();
    if (!looksLikeAllocationFailure(message) || dynamic_cast<const Error*>(&e) != nullptr) throw;
    throwOutOfMemory(stage, hint, message);
  }
}

void requireHostMemory(const std::string& stage, double bytes, const std::string& hint) {
  const double physical = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGESIZE));
  if (physical <= 0 || bytes <= physical) return;
  const std::string asked = humanBytes(bytes);
  throw OutOfMemory(stage, asked,
                    stage + ": needs about " + asked + ", more than this machine's " + humanBytes(physical) +
                        " of memory; " + hint);
}

}  // namespace pareto
