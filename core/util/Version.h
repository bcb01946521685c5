// The version of this build ("0.1.0+g<commit>" from a git checkout), as manifests, run records and --version
// print it. Defined in a file generated at configure time (core/util/Version.cpp.in).
#pragma once

namespace pareto {

const char* paretoVersion();

}  // namespace pareto
