# Finds every dependency named on the project card, failing with a message that says what to install.
# scripts/deps installs the Debian packages; the CUDA toolkit (headers for nccl.h, cuda_runtime_api.h,
# cublas_api.h) must already be in its standard location (/usr/local/cuda) or given as CUDAToolkit_ROOT.

function(greyhound_require found what hint)
  if(NOT ${found})
    message(FATAL_ERROR "greyhound: ${what} not found. ${hint}")
  endif()
endfunction()

find_package(Threads REQUIRED)

# CUDA toolkit: headers only. Nothing in greyhound links the real CUDA/NCCL libraries by default.
if(NOT CUDAToolkit_ROOT AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit QUIET)
greyhound_require(CUDAToolkit_FOUND "CUDA toolkit"
  "Install the CUDA toolkit in /usr/local/cuda or pass -DCUDAToolkit_ROOT=<dir>.")
find_path(GREYHOUND_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include /usr/local/include)
greyhound_require(GREYHOUND_NCCL_INCLUDE_DIR "nccl.h"
  "Install NCCL's headers (the CUDA toolkit's include dir or libnccl-dev) or pass -DGREYHOUND_NCCL_INCLUDE_DIR=<dir>.")
find_path(GREYHOUND_CUBLAS_INCLUDE_DIR cublas_api.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
greyhound_require(GREYHOUND_CUBLAS_INCLUDE_DIR "cublas_api.h" "Install cuBLAS headers with the CUDA toolkit.")

# Header-only interface target: compile against nccl.h / cuda_runtime_api.h / cublas_api.h, link nothing.
add_library(greyhound_cuda_headers INTERFACE)
target_include_directories(greyhound_cuda_headers SYSTEM INTERFACE
  ${GREYHOUND_NCCL_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS} ${GREYHOUND_CUBLAS_INCLUDE_DIR})

find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(HIREDIS QUIET IMPORTED_TARGET hiredis)
endif()
greyhound_require(HIREDIS_FOUND "hiredis" "Run scripts/deps (Debian package libhiredis-dev).")

find_package(spdlog QUIET)
greyhound_require(spdlog_FOUND "spdlog" "Run scripts/deps (Debian package libspdlog-dev).")
find_package(nlohmann_json 3 QUIET)
greyhound_require(nlohmann_json_FOUND "nlohmann_json" "Run scripts/deps (Debian package nlohmann-json3-dev).")
find_package(Boost 1.74 QUIET)
greyhound_require(Boost_FOUND "Boost (Asio, Beast)" "Run scripts/deps (Debian package libboost-dev).")

if(GREYHOUND_BUILD_TESTS)
  find_package(GTest QUIET)
  greyhound_require(GTest_FOUND "GoogleTest" "Run scripts/deps (Debian packages libgtest-dev libgmock-dev).")
endif()
if(GREYHOUND_BUILD_BENCH)
  find_package(benchmark QUIET)
  greyhound_require(benchmark_FOUND "Google Benchmark" "Run scripts/deps (Debian package libbenchmark-dev).")
endif()
