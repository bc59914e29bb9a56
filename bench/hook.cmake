# bench/hook_overhead: libgreyhound.so linked before the no-op NCCL, as LD_PRELOAD would place it.
add_executable(hook_overhead ${CMAKE_CURRENT_SOURCE_DIR}/hook/hook_overhead.cpp)
target_link_libraries(hook_overhead PRIVATE greyhound greyhound_nccl_fake greyhound_core greyhound_cuda_headers
                      ${CMAKE_DL_LIBS})
target_link_options(hook_overhead PRIVATE -Wl,--no-as-needed)  # keep the no-op NCCL: only the hook references it
