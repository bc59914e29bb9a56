# analysis benchmarks and the detector evaluation (bench/analysis). Figures they print are quoted in
# docs/analysis.md together with the command that printed them.
include(${CMAKE_CURRENT_SOURCE_DIR}/analysis/eval_lib.cmake)

# Accuracy of bocd+v, bocd and window on labelled traces, side by side with the paper's Tables 3/4.
add_executable(greyhound-eval-detect ${CMAKE_CURRENT_SOURCE_DIR}/analysis/evaluate.cpp)
target_link_libraries(greyhound-eval-detect PRIVATE greyhound_analysis_eval greyhound_common)

# Bocd observations per second per core, by pruning threshold.
add_executable(greyhound-bench-bocd ${CMAKE_CURRENT_SOURCE_DIR}/analysis/bench_bocd.cpp)
target_link_libraries(greyhound-bench-bocd PRIVATE greyhound_analysis_eval benchmark::benchmark)

# detect_period on a 100k-record window, and PeriodDetector records per second.
add_executable(greyhound-bench-period ${CMAKE_CURRENT_SOURCE_DIR}/analysis/bench_period.cpp)
target_link_libraries(greyhound-bench-period PRIVATE greyhound_analysis_eval benchmark::benchmark)
