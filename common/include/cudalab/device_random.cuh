// random_fill: seeded test data generated on the GPU, for inputs too large to make on the host
// quickly (a 2^28-element perf input takes seconds there, a millisecond here). Element i is the same
// draw of the same stream as random_vector(n, seed, lo, hi)'s element i (random.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "check.cuh"
#include "random.hpp"

namespace cudalab {

namespace detail {

template <class T>
__global__ void random_fill_kernel(T* out, std::size_t n, std::uint64_t seed, double lo, double hi) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    // Rng::at(seed, i).next(), written out: device code cannot call the host class.
    std::uint64_t z = seed + (i + 1) * Rng::kGolden;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    if constexpr (std::is_floating_point_v<T>) {
      const double u = static_cast<double>(z >> 11) * 0x1.0p-53;
      // Explicit rounding: no fused multiply-add, so the value is the one the host computes.
      out[i] = static_cast<T>(__dadd_rn(lo, __dmul_rn(hi - lo, u)));
    } else {
      const auto ilo = static_cast<std::int64_t>(lo);
      const auto span = static_cast<std::uint64_t>(static_cast<std::int64_t>(hi) - ilo) + 1;
      out[i] = static_cast<T>(ilo + static_cast<std::int64_t>(span == 0 ? z : z % span));
    }
  }
}

}  // namespace detail

// Fills d_out[0, n) on `stream` with values uniform in [lo, hi] (integers inclusive, floating point
// in [lo, hi)). Integers must fit in a double exactly (|x| < 2^53).
template <class T>
void random_fill(T* d_out, std::size_t n, std::uint64_t seed, T lo, T hi, cudaStream_t stream = nullptr) {
  if (n == 0) return;
  constexpr int kBlock = 256;
  constexpr std::size_t kMaxBlocks = 4096;  // grid-stride: enough blocks to fill any GPU
  const auto blocks = static_cast<unsigned>(std::min<std::size_t>((n + kBlock - 1) / kBlock, kMaxBlocks));
  detail::random_fill_kernel<T><<<blocks, kBlock, 0, stream>>>(d_out, n, seed, static_cast<double>(lo),
                                                               static_cast<double>(hi));
  CUDA_CHECK_LAST();
}

}  // namespace cudalab
