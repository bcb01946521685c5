# The tokenizer's sources besides Tokenizer.cpp (listed in core/CMakeLists.txt), one concern per file.
target_sources(pareto_tokenizer PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/AddedTokens.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/BpeModel.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/ByteLevel.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/ConfigContext.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/Decoders.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/Normalizers.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/Pattern.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/PostProcessors.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/PreTokenizers.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/Regex.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer/Unicode.cpp
)
