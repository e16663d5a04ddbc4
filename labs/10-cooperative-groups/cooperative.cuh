// Lab 10 contract: the functions the tests call. Do not edit; implement them in cooperative.cu.
// All pointers are device pointers from cudaMalloc (256-byte aligned, so float4 loads are fine).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include <cudalab/check.cuh>

constexpr int kTileSize = 32;     // the tiles of tasks 1-3 are whole warps
constexpr int kBlockItems = 1024; // values per block in task 2

// Task 1: tile reductions. d_out[t] = d_in[32t] + ... + d_in[32t + 31] for each tile of 32 values;
// the last tile may be short (n need not be a multiple of 32). ceil(n / 32) outputs.
void tile_sums(const int* d_in, int* d_out, std::size_t n);

// Task 2: block reductions. d_out[b] = the sum of d_in[b * kBlockItems .. (b + 1) * kBlockItems), the
// last chunk possibly short. ceil(n / kBlockItems) outputs.
void block_sums(const float* d_in, float* d_out, std::size_t n);

// Task 3: warp vote, on groups of 32 consecutive values (group g holds d_in[32g .. 32g + 31]; the last
// group may be short, and only the values that exist take part).
//   count_above: *d_count = how many values are > threshold (the function sets *d_count itself).
//   warp_any_all: d_any[g] = 1 if some value of group g is > threshold, else 0;
//                 d_all[g] = 1 if every value of group g is > threshold, else 0.
void count_above(const float* d_in, std::size_t n, float threshold, unsigned int* d_count);
void warp_any_all(const float* d_in, std::size_t n, float threshold, int* d_any, int* d_all);

// Task 4: the largest grid of `kernel` that is resident on the GPU all at once (blocks of
// block_threads threads with dynamic_smem_bytes of dynamic shared memory each): the grid a cooperative
// launch of that kernel may use. A larger cooperative launch fails.
int cooperative_grid_blocks(const void* kernel, int block_threads, std::size_t dynamic_smem_bytes);

// Room for one partial value per block of any grid that can be resident on this device
// (the per-SM block limit times the SMs): the size of the d_partials buffers below.
inline std::size_t coop_partials_capacity() {
  int device = 0, blocks_per_sm = 0, sms = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&blocks_per_sm, cudaDevAttrMaxBlocksPerMultiprocessor, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return static_cast<std::size_t>(blocks_per_sm) * sms;
}

// Task 5: one cooperative kernel computes *d_out = the sum of the n values (n >= 1): every block
// stores a partial sum in d_partials, the whole grid meets at grid.sync(), and one block adds the
// partials. Launched with cudaLaunchCooperativeKernel on a grid from cooperative_grid_blocks.
void coop_reduce(const float* d_in, float* d_out, std::size_t n, float* d_partials);

// Task 6: d_out[i] = d_in[i] - mean(d_in), in one cooperative kernel (n >= 1): partial sums, grid.sync(),
// then every block reads the total and subtracts the mean from its share of the values.
void subtract_mean(const float* d_in, float* d_out, std::size_t n, float* d_partials);
