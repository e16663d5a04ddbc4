// scribble_shared_memory(): junk in the shared memory of every SM just before the code under test. Shared
// memory is not cleared between kernels, so a kernel that reads a slot it never wrote (a missing barrier,
// a slot past its array, a tail it did not zero) reads that junk, not the zeros of a fresh GPU or a value
// an earlier block happened to leave, which may be right by luck.
#pragma once

#include <cuda_runtime.h>

#include "check.cuh"
#include "gtest_cuda.hpp"

namespace cudalab {

// What goes in: word i of every SM's shared memory becomes pattern ^ (i * mix) (mix = 0: pattern
// everywhere). Pick a pattern the lab's kernels cannot mistake for data: a NaN for floats, 0 below every
// sort key, a large number for sums.
struct Scribble {
  unsigned pattern = 0x5A5A5A5Au;  // a large int, and about 1.5e16 as a float
  unsigned mix = 0;
  bool in_small_mode = false;  // keep it in `grade --small` runs too (never under compute-sanitizer)
};

namespace {  // one test file per binary includes this; internal linkage keeps RDC builds link-clean

__global__ void scribble_shared_kernel(unsigned pattern, unsigned mix, unsigned words) {
  extern __shared__ unsigned s_scribble[];
  volatile unsigned* junk = s_scribble;  // stores that nothing reads: volatile keeps them from being dropped
  for (unsigned i = threadIdx.x; i < words; i += blockDim.x) junk[i] = pattern ^ (i * mix);
}

// Fills the shared memory of every SM and waits for it. One block takes all the shared memory a block
// may have; several waves of them reach every SM. Never under compute-sanitizer: the tool sees each
// access itself, so junk cannot change its verdict, and racecheck took about a second per scribble.
inline void scribble_shared_memory(const Scribble& how = {}) {
  if (harness::settings().sanitizer_attached) return;
  if (small_mode() && !how.in_small_mode) return;
  int device = 0, bytes = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CUDA_CHECK(cudaFuncSetAttribute(scribble_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  constexpr int kWaves = 4;
  scribble_shared_kernel<<<kWaves * sms, 1024, bytes>>>(how.pattern, how.mix,
                                                        static_cast<unsigned>(bytes / sizeof(unsigned)));
  CUDA_CHECK_LAST();
  CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace
}  // namespace cudalab
