// Launch arithmetic: how many blocks cover n items, and facts about the device that size grids.
#pragma once

#include <cuda_runtime.h>

#include "check.cuh"

namespace cudalab {

// Smallest q with q * b >= a: the number of blocks of b threads that cover a items.
template <class T>
__host__ __device__ constexpr T ceil_div(T a, T b) {
  return (a + b - 1) / b;
}

// Multiprocessors of the current device (132 on an H100 SXM or H200).
inline int sm_count() {
  int device = 0;
  int count = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

}  // namespace cudalab
