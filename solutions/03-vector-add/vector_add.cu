// Lab 03: vector addition, from the whole host flow to a kernel that runs at memory speed.
// Reference solution. Regions between BEGIN/END SOLUTION are removed from the student's copy, and
// "STUB:" lines become code there (python3 -m grader skeleton --write).
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
  // BEGIN SOLUTION
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];  // the last block usually has threads past the end
  // END SOLUTION
}

void vector_add(const float* d_a, const float* d_b, float* d_c, int n) {
  if (n <= 0) return;  // a grid of zero blocks is an invalid launch
  // TODO(student): launch vector_add_kernel with enough blocks of kBlock threads to cover n, then
  //                check the launch with CUDA_CHECK_LAST() (about 3 lines).
  // BEGIN SOLUTION
  const int blocks = cudalab::ceil_div(n, kBlock);
  vector_add_kernel<<<blocks, kBlock>>>(d_a, d_b, d_c, n);
  CUDA_CHECK_LAST();
  // END SOLUTION
}

std::vector<float> vector_add_host(const std::vector<float>& a, const std::vector<float>& b) {
  const int n = static_cast<int>(a.size());
  std::vector<float> c(a.size());
  if (n == 0) return c;
  // TODO(student): the whole host flow, every call wrapped in CUDA_CHECK (about 12 lines):
  //   cudaMalloc three device arrays, cudaMemcpy a and b to the device, call vector_add,
  //   cudaMemcpy the result back into c, cudaFree all three.
  // BEGIN SOLUTION
  const std::size_t bytes = a.size() * sizeof(float);
  float *d_a = nullptr, *d_b = nullptr, *d_c = nullptr;
  CUDA_CHECK(cudaMalloc(&d_a, bytes));
  CUDA_CHECK(cudaMalloc(&d_b, bytes));
  CUDA_CHECK(cudaMalloc(&d_c, bytes));
  CUDA_CHECK(cudaMemcpy(d_a, a.data(), bytes, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_b, b.data(), bytes, cudaMemcpyHostToDevice));
  vector_add(d_a, d_b, d_c, n);
  // cudaMemcpy waits for the kernel (same stream), so no explicit synchronize is needed here.
  CUDA_CHECK(cudaMemcpy(c.data(), d_c, bytes, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaFree(d_a));
  CUDA_CHECK(cudaFree(d_b));
  CUDA_CHECK(cudaFree(d_c));
  // END SOLUTION
  return c;
}

// ---------------------------------------------------------------------------------------------
// Task 3: a grid-stride loop, correct for any n on whatever grid it is launched with.
// ---------------------------------------------------------------------------------------------

__global__ void vector_add_grid_stride_kernel(const float* a, const float* b, float* c, std::size_t n) {
  // TODO(student): add all n elements on whatever grid the caller chose (one block, or more threads
  //                than n), each exactly once. n can pass 2^31: no index or product in 32 bits (about 4 lines).
  // BEGIN SOLUTION
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    c[i] = a[i] + b[i];
  }
  // END SOLUTION
}

void vector_add_grid_stride(const float* d_a, const float* d_b, float* d_c, std::size_t n, int blocks,
                            int threads) {
  // TODO(student): launch the grid-stride kernel on exactly blocks x threads, then check it (2 lines).
  // BEGIN SOLUTION
  vector_add_grid_stride_kernel<<<blocks, threads>>>(d_a, d_b, d_c, n);
  CUDA_CHECK_LAST();
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// Task 4: coalescing. A warp reading p[i].x touches one float in every 32-byte particle, so each
// 32-byte memory sector it loads carries 4 useful bytes; the SoA layout uses every byte it loads.
// ---------------------------------------------------------------------------------------------

__global__ void scale_x_aos_kernel(Particle* p, std::size_t n, float s) {
  // TODO(student): one thread per particle: scale its x, leave the other fields alone, guard the end (about 2 lines).
  // BEGIN SOLUTION
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i].x *= s;
  // END SOLUTION
}

__global__ void scale_x_soa_kernel(float* x, std::size_t n, float s) {
  // TODO(student): one thread per element: scale it, guard the end; n can pass 2^31: index in 64 bits (about 2 lines).
  // BEGIN SOLUTION
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= s;
  // END SOLUTION
}

void scale_x_aos(Particle* d_particles, std::size_t n, float s) {
  if (n == 0) return;
  // TODO(student): launch scale_x_aos_kernel over n particles and check it (about 2 lines).
  // BEGIN SOLUTION
  scale_x_aos_kernel<<<cudalab::ceil_div<std::size_t>(n, kBlock), kBlock>>>(d_particles, n, s);
  CUDA_CHECK_LAST();
  // END SOLUTION
}

void scale_x_soa(float* d_x, std::size_t n, float s) {
  if (n == 0) return;
  // TODO(student): launch scale_x_soa_kernel over n elements and check it (about 2 lines).
  // BEGIN SOLUTION
  scale_x_soa_kernel<<<cudalab::ceil_div<std::size_t>(n, kBlock), kBlock>>>(d_x, n, s);
  CUDA_CHECK_LAST();
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// Task 5: pinned host memory.
// ---------------------------------------------------------------------------------------------

float* allocate_pinned(std::size_t n) {
  // TODO(student): allocate n floats of page-locked host memory with cudaMallocHost (about 3 lines).
  // BEGIN SOLUTION
  float* h_pinned = nullptr;
  CUDA_CHECK(cudaMallocHost(&h_pinned, n * sizeof(float)));
  return h_pinned;
  // END SOLUTION
  // STUB: return nullptr;
}

void free_pinned(float* h_pinned) {
  // TODO(student): release memory from allocate_pinned with cudaFreeHost (1 line).
  // BEGIN SOLUTION
  CUDA_CHECK(cudaFreeHost(h_pinned));
  // END SOLUTION
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
  // BEGIN SOLUTION
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * kFastBlock * kVec + threadIdx.x;
  float4 va[kVec], vb[kVec];
#pragma unroll
  for (int k = 0; k < kVec; ++k) {  // consecutive threads read consecutive float4: coalesced
    const std::size_t i = base + static_cast<std::size_t>(k) * kFastBlock;
    if (i < n4) {
      va[k] = a[i];
      vb[k] = b[i];
    }
  }
#pragma unroll
  for (int k = 0; k < kVec; ++k) {
    const std::size_t i = base + static_cast<std::size_t>(k) * kFastBlock;
    if (i < n4) c[i] = make_float4(va[k].x + vb[k].x, va[k].y + vb[k].y, va[k].z + vb[k].z, va[k].w + vb[k].w);
  }
  if (blockIdx.x == 0 && threadIdx.x < tail) c_tail[threadIdx.x] = a_tail[threadIdx.x] + b_tail[threadIdx.x];
  // END SOLUTION
}

void vector_add_fast(const float* d_a, const float* d_b, float* d_c, std::size_t n) {
  if (n == 0) return;
  // TODO(student): launch your kernel. cudaMalloc returns 256-byte aligned pointers, so the arrays
  //                can be read as float4 (about 6 lines).
  // BEGIN SOLUTION
  const std::size_t n4 = n / 4;
  const int tail = static_cast<int>(n % 4);
  const std::size_t blocks = std::max<std::size_t>(1, cudalab::ceil_div<std::size_t>(n4, kFastBlock * kVec));
  vector_add_fast_kernel<<<blocks, kFastBlock>>>(
      reinterpret_cast<const float4*>(d_a), reinterpret_cast<const float4*>(d_b),
      reinterpret_cast<float4*>(d_c), n4, d_a + 4 * n4, d_b + 4 * n4, d_c + 4 * n4, tail);
  CUDA_CHECK_LAST();
  // END SOLUTION
}
