// random_fill: seeded test data generated on the GPU, for inputs too large to make on the host
// quickly (a 2^28-element perf input takes seconds there, a millisecond here). Element i is the same
// draw of the same stream as random_vector(n, seed, lo, hi)'s element i (random.hpp).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "check.cuh"
#include "random.hpp"

namespace cudalab {

namespace detail {

template <class T>
__global__ void random_fill_kernel(T* out, std::size_t n, std::uint64_t seed, T lo, T hi) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    Rng rng = Rng::at(seed, i);
    out[i] = draw(rng, lo, hi);
  }
}

}  // namespace detail

// Fills d_out[0, n) on `stream` with values uniform in [lo, hi] (integers inclusive, floating point
// in [lo, hi)).
template <class T>
void random_fill(T* d_out, std::size_t n, std::uint64_t seed, T lo, T hi, cudaStream_t stream = nullptr) {
  if (n == 0) return;
  constexpr int kBlock = 256;
  constexpr std::size_t kMaxBlocks = 4096;  // grid-stride: enough blocks to fill any GPU
  const auto blocks = static_cast<unsigned>(std::min<std::size_t>((n + kBlock - 1) / kBlock, kMaxBlocks));
  detail::random_fill_kernel<T><<<blocks, kBlock, 0, stream>>>(d_out, n, seed, lo, hi);
  CUDA_CHECK_LAST();
}

}  // namespace cudalab
