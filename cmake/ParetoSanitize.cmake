# Instrumented builds. Both apply to every target of the build, so they belong in a build folder of their own
# (tests/sanitize.sh: build-asan; tests/fuzz/run.sh: build-fuzz). LibTorch itself is not instrumented: its
# allocations are seen (malloc is intercepted) but not its internal accesses.
#
# PARETO_SANITIZE=address,undefined: core and tests with AddressSanitizer + UndefinedBehaviorSanitizer; any
# undefined behaviour aborts (no recovery) so that ctest reports it as a failure.
# PARETO_FUZZ=ON: the libFuzzer targets of tests/fuzz (clang only), with ASan + UBSan and coverage
# instrumentation of every library they link.
set(PARETO_SANITIZE "" CACHE STRING "Sanitizers for every target, e.g. address,undefined (see tests/sanitize.sh)")
option(PARETO_FUZZ "Build the libFuzzer targets in tests/fuzz (clang; see tests/fuzz/run.sh)" OFF)

# C++ only: nvcc (kernels/) does not take these flags.
if(PARETO_SANITIZE)
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${PARETO_SANITIZE};-fno-sanitize-recover=all;-fno-omit-frame-pointer;-g>")
  add_link_options("$<$<LINK_LANGUAGE:CXX>:-fsanitize=${PARETO_SANITIZE}>")
endif()

if(PARETO_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "PARETO_FUZZ needs clang (libFuzzer): configure with CC=clang CXX=clang++ "
                        "(tests/fuzz/run.sh does)")
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link,address,undefined;-fno-sanitize-recover=all;-fno-omit-frame-pointer;-g>")
  add_link_options("$<$<LINK_LANGUAGE:CXX>:-fsanitize=address,undefined>")
endif()
