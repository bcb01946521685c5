target_sources(pareto_fidelity PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/eval/DecodeFidelity.cpp ${CMAKE_CURRENT_SOURCE_DIR}/eval/Continuations.cpp ${CMAKE_CURRENT_SOURCE_DIR}/analysis/ActivationDrift.cpp)
