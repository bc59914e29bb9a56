# greyhound-gpu-check: the validation's tests on a real GPU, linked against the toolkit's real CUDA runtime,
# cuBLAS, cuBLASLt and NCCL (scripts/gpu-check runs it; CI checks its arguments and its refusal without a GPU).
find_library(GREYHOUND_TOOLKIT_NCCL nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
if(TARGET CUDA::cudart AND TARGET CUDA::cublas AND TARGET CUDA::cublasLt AND GREYHOUND_TOOLKIT_NCCL)
  add_executable(greyhound-gpu-check ${CMAKE_SOURCE_DIR}/bench/gpu/gpu_check.cpp)
  target_link_libraries(greyhound-gpu-check PRIVATE greyhound_job_static greyhound_core CUDA::cudart CUDA::cublas
                        CUDA::cublasLt ${GREYHOUND_TOOLKIT_NCCL} nlohmann_json::nlohmann_json)
else()
  message(STATUS "greyhound-gpu-check not built: the CUDA runtime, cuBLAS, cuBLASLt or NCCL library is missing")
endif()
