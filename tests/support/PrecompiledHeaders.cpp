// The translation unit that builds the tests' precompiled header (tests/CMakeLists.txt: pareto_test_pch); the
// headers themselves are listed there.
