pareto_add_test(test_fidelity SOURCES test_fidelity.cpp LIBS pareto_eval pareto_analysis)
# KL divergence to the dense model: the per-position values, llama.cpp's percentile, perplexity --dense.
pareto_add_test(test_perplexity_kl SOURCES test_perplexity_kl.cpp LIBS pareto_eval)
add_dependencies(test_perplexity_kl pareto-cli)
target_compile_definitions(test_perplexity_kl PRIVATE PARETO_CLI_PATH="$<TARGET_FILE:pareto-cli>")
