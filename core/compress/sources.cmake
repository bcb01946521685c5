target_sources(pareto_compress PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/compress/SparsityPattern.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/compress/PruneInputs.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/compress/PruneMask.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/compress/MagnitudePrune.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/compress/WandaPrune.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/compress/ObsSweep.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/compress/SparseGpt.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/compress/QuantGrid.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/compress/Gptq.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/compress/Spqr.cpp
  ${CMAKE_CURRENT_SOURCE_DIR}/compress/RecipeEstimate.cpp
)
