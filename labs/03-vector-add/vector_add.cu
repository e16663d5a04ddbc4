// Lab 03: vector addition, from the whole host flow to a kernel that runs at memory speed.
#include "vector_add.cuh"

#include <cuda_runtime.h>

#include <algorithm>

#include <cudalab/check.cuh>
#include <cudalab/launch.cuh>

constexpr int kBlock = 256;  // threads per block for the simple kernels

// ---------------------------------------------------------------------------------------------
// Task 1 + 2: one thread per element.
// ---------------------------------------------------------------------------------------------

__global__ void vector_add_kernel(const float* a, const float* b, float* c, int n) {
  // TODO(student): global index of this thread; add one element if it is inside the array (about 2 lines).
}

void vector_add(const float* d_a, const float* d_b, float* d_c, int n) {
  if (n <= 0) return;  // a grid of zero blocks is an invalid launch
  // TODO(student): launch vector_add_kernel with enough blocks of kBlock threads to cover n, then
  //                check the launch with CUDA_CHECK_LAST() (about 3 lines).
}

std::vector<float> vector_add_host(const std::vector<float>& a, const std::vector<float>& b) {
  const int n = static_cast<int>(a.size());
  std::vector<float> c(a.size());
  if (n == 0) return c;
  // TODO(student): the whole host flow, every call wrapped in CUDA_CHECK (about 12 lines):
  //   cudaMalloc three device arrays, cudaMemcpy a and b to the device, call vector_add,
  //   cudaMemcpy the result back into c, cudaFree all three.
  return c;
}

// ---------------------------------------------------------------------------------------------
// Task 3: a grid-stride loop, correct for any n on whatever grid it is launched with.
// ---------------------------------------------------------------------------------------------

__global__ void vector_add_grid_stride_kernel(const float* a, const float* b, float* c, std::size_t n) {
  // TODO(student): add all n elements on whatever grid the caller chose (one block, or more threads
  //                than n), each exactly once. n can pass 2^31: no index or product in 32 bits (about 4 lines).
}

void vector_add_grid_stride(const float* d_a, const float* d_b, float* d_c, std::size_t n, int blocks,
                            int threads) {
  // TODO(student): launch the grid-stride kernel on exactly blocks x threads, then check it (2 lines).
}

// ---------------------------------------------------------------------------------------------
// Task 4: coalescing. A warp reading p[i].x touches one float in every 32-byte particle, so each
// 32-byte memory sector it loads carries 4 useful bytes; the SoA layout uses every byte it loads.
// ---------------------------------------------------------------------------------------------

__global__ void scale_x_aos_kernel(Particle* p, std::size_t n, float s) {
  // TODO(student): one thread per particle: scale its x, leave the other fields alone, guard the end (about 2 lines).
}

__global__ void scale_x_soa_kernel(float* x, std::size_t n, float s) {
  // TODO(student): one thread per element: scale it, guard the end; n can pass 2^31: index in 64 bits (about 2 lines).
}

void scale_x_aos(Particle* d_particles, std::size_t n, float s) {
  if (n == 0) return;
  // TODO(student): launch scale_x_aos_kernel over n particles and check it (about 2 lines).
}

void scale_x_soa(float* d_x, std::size_t n, float s) {
  if (n == 0) return;
  // TODO(student): launch scale_x_soa_kernel over n elements and check it (about 2 lines).
}

// ---------------------------------------------------------------------------------------------
// Task 5: pinned host memory.
// ---------------------------------------------------------------------------------------------

float* allocate_pinned(std::size_t n) {
  // TODO(student): allocate n floats of page-locked host memory with cudaMallocHost (about 3 lines).
  return nullptr;
}

void free_pinned(float* h_pinned) {
  // TODO(student): release memory from allocate_pinned with cudaFreeHost (1 line).
}

// ---------------------------------------------------------------------------------------------
// Challenge: memory speed. Each thread moves kVec float4 (16-byte) loads per input, all issued before
// the first add, so many loads are in flight; one thread of block 0 handles the n % 4 tail.
// ---------------------------------------------------------------------------------------------

constexpr int kFastBlock = 256;
constexpr int kVec = 4;  // float4 loads per input per thread

__global__ void vector_add_fast_kernel(const float4* __restrict__ a, const float4* __restrict__ b,
                                       float4* __restrict__ c, std::size_t n4, const float* a_tail,
                                       const float* b_tail, float* c_tail, int tail) {
  // TODO(student): the fastest correct kernel you can write. Ideas: 16-byte loads (float4),
  //                several independent loads per thread, and a separate path for the last n % 4.
}

void vector_add_fast(const float* d_a, const float* d_b, float* d_c, std::size_t n) {
  if (n == 0) return;
  // TODO(student): launch your kernel. cudaMalloc returns 256-byte aligned pointers, so the arrays
  //                can be read as float4 (about 6 lines).
}
