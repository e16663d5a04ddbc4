// Lab 09 contract: the functions the tests call. Do not edit; implement them in streams.cu.
//
// Every pipeline computes h_out[i] = work(h_in[i]) for i < n: copy the input to the device, run the
// work kernel, copy the result back. d_in and d_out are device buffers of n floats each that the
// caller allocated; chunk c of the data always lives at the same offset in them as on the host.
// Every function returns only when h_out holds the whole result.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <vector>

#include <cudalab/check.cuh>

// ---------------------------------------------------------------------------------------------
// Given (not a task): the work per element, with a dial for its arithmetic.
// work(x): y = x, then `iters` times y = 0.5 * y + x (one fused multiply-add). y tends to 2x, so the
// results are easy to check, while `iters` sets how long the kernel runs: 0 makes it a plain copy
// (the pipeline is then transfer-bound); a few thousand make it as long as the PCIe copies.
// Both translation units get their own copy (anonymous namespace), so the tests time exactly the
// kernel the pipelines run.
// ---------------------------------------------------------------------------------------------
namespace {

constexpr int kWorkBlock = 256;

__global__ void work_kernel(const float* __restrict__ in, float* __restrict__ out, std::size_t n, int iters) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float x = in[i];
  float y = x;
#pragma unroll 16
  for (int k = 0; k < iters; ++k) y = fmaf(y, 0.5f, x);
  out[i] = y;
}

// Enqueues work on n elements into `stream` and returns at once (nothing here waits for the GPU).
inline void launch_work(const float* d_in, float* d_out, std::size_t n, int iters, cudaStream_t stream) {
  if (n == 0) return;
  const std::size_t blocks = (n + kWorkBlock - 1) / kWorkBlock;
  work_kernel<<<static_cast<unsigned int>(blocks), kWorkBlock, 0, stream>>>(d_in, d_out, n, iters);
  // Only the launch itself is checked: CUDA_CHECK_LAST() in the debug preset would also synchronize
  // the whole device, which serializes the very overlap this lab is about.
  CUDA_CHECK(cudaGetLastError());
}

// The same arithmetic on the CPU, bit for bit: std::fma rounds once, exactly like fmaf on the GPU.
inline float work_reference(float x, int iters) {
  float y = x;
  for (int k = 0; k < iters; ++k) y = std::fma(y, 0.5f, x);
  return y;
}

}  // namespace

// Chunk c of n elements split into num_chunks: [chunk_begin(n, k, c), chunk_begin(n, k, c + 1)).
// Sizes differ by at most one element, so num_chunks need not divide n (every chunk is non-empty
// when num_chunks <= n).
inline std::size_t chunk_begin(std::size_t n, int num_chunks, int c) {
  return n * static_cast<std::size_t>(c) / static_cast<std::size_t>(num_chunks);
}

// Task 1: serial. Whole-array copy in, kernel, copy out, one after the other on one stream.
// Host buffers may be pageable or pinned.
void run_serial(const float* h_in, float* h_out, float* d_in, float* d_out, std::size_t n, int iters);

// Task 2: streams of the pipeline: `count` new streams that never synchronize with the legacy
// default stream (cudaStreamNonBlocking), and their release.
std::vector<cudaStream_t> create_streams(int count);
void destroy_streams(const std::vector<cudaStream_t>& streams);

// Task 3: the pipeline. h_in and h_out are pinned (cudaMallocHost). Chunk c goes to stream
// streams[c % streams.size()]: its H2D copy, its kernel and its D2H copy, all asynchronous, so
// one chunk's copies overlap other chunks' kernels. Nothing may use the legacy default stream.
// Optional trace (task 6): when not null, it holds 4 * num_chunks events; record, on chunk c's
// stream, trace[4c] before its H2D copy, trace[4c + 1] after it, trace[4c + 2] after its kernel
// and trace[4c + 3] after its D2H copy.
void run_pipelined(const float* h_in, float* h_out, float* d_in, float* d_out, std::size_t n, int iters,
                   int num_chunks, const std::vector<cudaStream_t>& streams, const cudaEvent_t* trace = nullptr);

// Task 4: one stream per stage. All H2D copies go to s_h2d, all kernels to s_compute, all D2H
// copies to s_d2h; events (cudaEventRecord + cudaStreamWaitEvent) make chunk c's kernel wait for
// its H2D copy, and its D2H copy wait for its kernel. The caller owns the three (non-blocking) streams.
void run_three_stage(const float* h_in, float* h_out, float* d_in, float* d_out, std::size_t n, int iters,
                     int num_chunks, cudaStream_t s_h2d, cudaStream_t s_compute, cudaStream_t s_d2h);

// Task 5: the pipeline of task 3 that also tells the host when each chunk is back: on_done(c, user)
// runs exactly once per chunk, after chunk c's D2H copy has finished (cudaLaunchHostFunc). A host
// function enqueued in a stream must not call the CUDA API; on_done does not.
using ChunkDone = void (*)(int chunk, void* user);
void run_pipelined_with_callback(const float* h_in, float* h_out, float* d_in, float* d_out, std::size_t n,
                                 int iters, int num_chunks, const std::vector<cudaStream_t>& streams,
                                 ChunkDone on_done, void* user);
