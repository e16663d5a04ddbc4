// Lab 06 contract: the functions the tests call. Do not edit; implement them in reduce.cu.
//
// Every function sums the n values of d_in (n >= 1) and writes the sum to the device scalar *d_out.
// Nothing is copied back to the host: the tests copy *d_out themselves, so the timed region holds
// only your kernels, exactly as it does for cub::DeviceReduce::Sum. Each step comes in two types:
// float (compared with a float64 reference, with a tolerance) and int (compared exactly).
// All pointers are device pointers from cudaMalloc (256-byte aligned, so float4/int4 loads are fine).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cudalab/device_buffer.cuh>

// Scratch memory for the steps that need it, allocated by the caller once per input size, outside
// any timed region, and reused across calls:
//   partials<T>()  room for partials_capacity(n) values of T (4 bytes): per-block partial sums
//   counter()      one unsigned int, zero when the workspace is created. A function that uses it must
//                  leave it at zero again when it finishes (the next call relies on it).
class ReduceWorkspace {
 public:
  explicit ReduceWorkspace(std::size_t n) : storage_(partials_capacity(n)), counter_(1) {
    storage_.fill_bytes(0xFF);  // NaN as float, -1 as int: a partial that is read but never written shows
    counter_.fill_bytes(0);
  }

  // One partial per block for blocks that cover >= 32 values, for every pass, with room to spare.
  static std::size_t partials_capacity(std::size_t n) { return n / 16 + 65536; }

  template <class T>
  T* partials() {
    static_assert(sizeof(T) == sizeof(std::uint32_t), "partials hold 4-byte values (float or int)");
    return reinterpret_cast<T*>(storage_.data());
  }
  std::size_t capacity() const { return storage_.size(); }
  unsigned int* counter() { return counter_.data(); }

 private:
  cudalab::DeviceBuffer<std::uint32_t> storage_;
  cudalab::DeviceBuffer<unsigned int> counter_;
};

// Step 1: shared-memory tree, interleaved addressing (the divergent one), one value per thread.
void reduce_interleaved(const float* d_in, float* d_out, std::size_t n, ReduceWorkspace& ws);
void reduce_interleaved(const int* d_in, int* d_out, std::size_t n, ReduceWorkspace& ws);

// Step 2: shared-memory tree, sequential addressing (active threads are contiguous).
void reduce_sequential(const float* d_in, float* d_out, std::size_t n, ReduceWorkspace& ws);
void reduce_sequential(const int* d_in, int* d_out, std::size_t n, ReduceWorkspace& ws);

// Step 3: first add during load: each thread adds two values before the tree; half the blocks.
void reduce_first_add(const float* d_in, float* d_out, std::size_t n, ReduceWorkspace& ws);
void reduce_first_add(const int* d_in, int* d_out, std::size_t n, ReduceWorkspace& ws);

// Step 4: the block's tree done with warp shuffles (__shfl_down_sync) instead of shared memory.
void reduce_shuffle(const float* d_in, float* d_out, std::size_t n, ReduceWorkspace& ws);
void reduce_shuffle(const int* d_in, int* d_out, std::size_t n, ReduceWorkspace& ws);

// Step 5: ONE kernel launch for any n: an occupancy-sized grid, each block writes a partial, and the
// last block to finish (found with __threadfence and an atomic counter) adds the partials and resets
// the counter.
void reduce_single_pass(const float* d_in, float* d_out, std::size_t n, ReduceWorkspace& ws);
void reduce_single_pass(const int* d_in, int* d_out, std::size_t n, ReduceWorkspace& ws);
