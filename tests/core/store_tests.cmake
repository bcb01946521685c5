# The experiment store (SQLite, no LibTorch), the CLI's run history and recording, and the exports.
find_package(SQLite3 REQUIRED)   # imported targets are per directory; the test opens files directly too
pareto_add_test(test_store SOURCES test_store.cpp LIBS pareto_store SQLite::SQLite3)
pareto_add_test(test_store_cli SOURCES test_store_cli.cpp LIBS pareto_store)
add_dependencies(test_store_cli pareto-cli)
target_compile_definitions(test_store_cli PRIVATE PARETO_CLI_PATH="$<TARGET_FILE:pareto-cli>")
pareto_add_test(test_export SOURCES test_export.cpp LIBS pareto_export pareto_compress)
add_dependencies(test_export pareto-cli)
target_compile_definitions(test_export PRIVATE PARETO_CLI_PATH="$<TARGET_FILE:pareto-cli>")
# GGUF: block layouts, the container, export gguf and the check by llama.cpp (node-llama-cpp, installed into the
# build by scripts/setup.sh --llama-cpp; the test fails, not skips, without it).
pareto_add_test(test_gguf SOURCES test_gguf.cpp LIBS pareto_export pareto_eval pareto_compress)
target_compile_definitions(test_gguf PRIVATE PARETO_NODE_LLAMA_CPP_DIR="${PROJECT_BINARY_DIR}/node-llama-cpp")
# compressed-tensors (pack-quantized for vLLM / SGLang): the packing rules on hand-made weights, and compressed
# ref-tiny folders exported and dequantized back by the format's own rule.
pareto_add_test(test_compressed_tensors SOURCES test_compressed_tensors.cpp LIBS pareto_export pareto_compress)
add_dependencies(test_compressed_tensors pareto-cli)
target_compile_definitions(test_compressed_tensors PRIVATE PARETO_CLI_PATH="$<TARGET_FILE:pareto-cli>")
# synthesize: a random-weight checkpoint of a preset, sharded as transformers shards one.
pareto_add_test(test_synthesize SOURCES test_synthesize.cpp LIBS pareto_export)
add_dependencies(test_synthesize pareto-cli)
target_compile_definitions(test_synthesize PRIVATE PARETO_CLI_PATH="$<TARGET_FILE:pareto-cli>")
# Streaming: a model read block by block, activations on device, host or scratch file, memory budgets kept.
pareto_add_test(test_streaming SOURCES test_streaming.cpp LIBS pareto_eval pareto_compress)
add_dependencies(test_streaming pareto-cli)
target_compile_definitions(test_streaming PRIVATE PARETO_CLI_PATH="$<TARGET_FILE:pareto-cli>")
