pareto_add_test(test_fidelity SOURCES test_fidelity.cpp LIBS pareto_fidelity)
