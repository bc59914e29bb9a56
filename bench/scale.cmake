# The master's load bench (greyhound-bench-load, docs/operations.md "Scale"): a synthetic job of 10,000 ranks
# fed to one greyhound-master through Redis. Always built: a test runs it small (tests/integration).
add_library(greyhound_bench_scale STATIC ${CMAKE_CURRENT_LIST_DIR}/scale/synthetic_job.cpp)
target_include_directories(greyhound_bench_scale PUBLIC ${CMAKE_SOURCE_DIR})
target_link_libraries(greyhound_bench_scale PUBLIC greyhound_store)

add_executable(greyhound-bench-load ${CMAKE_CURRENT_LIST_DIR}/scale/load_bench.cpp)
target_link_libraries(greyhound-bench-load PRIVATE greyhound_bench_scale greyhound_simcluster_lib Threads::Threads)
