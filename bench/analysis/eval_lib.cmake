# greyhound_analysis_eval: the labelled trace generator and the scoring of detectors (bench/analysis).
# Included from bench/analysis.cmake and tests/analysis/CMakeLists.txt (the accuracy test runs it too), so
# it is guarded against a second definition.
if(NOT TARGET greyhound_analysis_eval)
  add_library(greyhound_analysis_eval STATIC
    ${CMAKE_SOURCE_DIR}/bench/analysis/trace_generator.cpp
    ${CMAKE_SOURCE_DIR}/bench/analysis/evaluation.cpp
    ${CMAKE_SOURCE_DIR}/bench/analysis/synthetic_ops.cpp
  )
  target_include_directories(greyhound_analysis_eval PUBLIC ${CMAKE_SOURCE_DIR}/bench/analysis)
  target_link_libraries(greyhound_analysis_eval PUBLIC greyhound_analysis)
endif()
