# mitigate benchmarks (docs/mitigation.md): bench_solver (S2 solve times vs the paper's cvxpy),
# bench_topology (S3 planning time and result), bench_s2_step (what S2 wins back moving one micro-batch at a
# time against multiples of P), bench_ski_rental (lost time of the ski-rental controller vs
# always-S1, immediate-S4 and the offline oracle).
add_executable(bench_solver ${CMAKE_CURRENT_LIST_DIR}/mitigate/solver_bench.cpp)
target_link_libraries(bench_solver PRIVATE greyhound_mitigate)

add_executable(bench_ski_rental ${CMAKE_CURRENT_LIST_DIR}/mitigate/ski_rental_eval.cpp)
target_link_libraries(bench_ski_rental PRIVATE greyhound_mitigate)

add_executable(bench_topology ${CMAKE_CURRENT_LIST_DIR}/mitigate/topology_bench.cpp)
target_link_libraries(bench_topology PRIVATE greyhound_mitigate)

add_executable(bench_s2_step ${CMAKE_CURRENT_LIST_DIR}/mitigate/s2_step_bench.cpp)
target_link_libraries(bench_s2_step PRIVATE greyhound_mitigate)
