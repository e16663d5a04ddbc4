// Lab 08: a 256-bin byte histogram, from global atomics to private, coarsened and aggregated counts.
#include "histogram.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include <cudalab/check.cuh>
#include <cudalab/launch.cuh>

constexpr int kBlock = 256;           // threads per block for tasks 1-3
constexpr int kBlocksPerSm = 8;       // 8 x 256 threads fill an SM (2048 threads on sm_90)
constexpr int kWarp = 32;

// Blocks for a grid-stride loop: enough to cover n once, but no more than fill the GPU. Past that,
// extra blocks only add more private histograms to commit.
[[maybe_unused]] static int grid_stride_blocks(std::size_t items, int block = kBlock) {
  static const int max_blocks = cudalab::sm_count() * kBlocksPerSm;
  const std::size_t needed = cudalab::ceil_div<std::size_t>(std::max<std::size_t>(items, 1), block);
  return static_cast<int>(std::min<std::size_t>(needed, max_blocks));
}

// ---------------------------------------------------------------------------------------------
// Task 1: global atomics. 2^28 threads update 256 counters in L2: correct, and the baseline that
// every later step is measured against. On the hot-bin input all of them hit one address.
// ---------------------------------------------------------------------------------------------

__global__ void histogram_global_kernel(const unsigned char* in, std::size_t n, unsigned int* bins) {
  // TODO(student): one thread per byte: guard the end, then atomicAdd 1 to the byte's bin (about 2 lines).
}

void histogram_global(const unsigned char* d_in, std::size_t n, unsigned int* d_bins) {
  // TODO(student): zero the bins (cudaMemsetAsync), then, if n > 0, launch histogram_global_kernel
  //                with one thread per byte and check the launch (about 5 lines).
}

// ---------------------------------------------------------------------------------------------
// Task 2: privatization. Each block counts into 256 counters of its own in shared memory, where an
// atomic is a short read-modify-write next to the SM, and adds them to the global bins once at the end.
// ---------------------------------------------------------------------------------------------

__global__ void histogram_shared_kernel(const unsigned char* in, std::size_t n, unsigned int* bins) {
  // TODO(student): (about 15 lines)
  //   1. declare __shared__ unsigned int s_bins[kNumBins]; zero it (a loop strided by blockDim.x,
  //      so any block size works), then __syncthreads();
  //   2. grid-stride loop over the input: atomicAdd(&s_bins[byte], 1u); then __syncthreads();
  //   3. commit: each thread adds some bins of s_bins into bins (skip the zero ones).
}

void histogram_shared(const unsigned char* d_in, std::size_t n, unsigned int* d_bins) {
  // TODO(student): zero the bins, then, if n > 0, launch histogram_shared_kernel on
  //                grid_stride_blocks(n, kBlock) blocks of kBlock threads; check it (about 5 lines).
}

// ---------------------------------------------------------------------------------------------
// Task 3: text histogram (PMPP). Seven bins of four letters. The course notes' version indexes a
// 7-entry shared array with byte / 4, which reaches 63 for any byte: an out-of-bounds shared write.
// The bin must come from the letter's position in the alphabet, and only after checking it is one.
// ---------------------------------------------------------------------------------------------

__global__ void histogram_text_kernel(const char* text, std::size_t n, unsigned int* bins) {
  // TODO(student): a privatized histogram as in task 2, with kTextBins shared counters (about 15
  //   lines). Per byte: read it as unsigned char (char is signed: bytes 128-255 would be negative),
  //   fold 'A'-'Z' onto 'a'-'z', and count only letters, into bin (letter - 'a') / 4.
}

void histogram_text(const char* d_text, std::size_t n, unsigned int* d_bins) {
  // TODO(student): zero the kTextBins bins, then, if n > 0, launch histogram_text_kernel; check it (about 5 lines).
}

// ---------------------------------------------------------------------------------------------
// Task 4: coarsening and aggregation. A thread reads kLoads uint4 (64 bytes) per step, all issued
// before the first is used, so many loads are in flight. Each warp counts into its own histogram
// (a hot bin is then contended by 32 threads, not by a whole block), and a thread merges a run of
// equal bytes in a register, so a long run costs one atomicAdd instead of one per byte.
// ---------------------------------------------------------------------------------------------

constexpr int kCoarseBlock = 256;
[[maybe_unused]] constexpr int kCoarseWarps = kCoarseBlock / kWarp;
[[maybe_unused]] constexpr int kLoads = 4;  // uint4 loads per thread per step

__global__ void histogram_coarsened_kernel(const uint4* in16, std::size_t n16, const unsigned char* tail,
                                           int n_tail, unsigned int* bins) {
  // TODO(student): (about 35 lines)
  //   1. declare __shared__ unsigned int s_bins[kCoarseWarps][kNumBins] (one histogram per warp),
  //      zero all of it, __syncthreads();
  //   2. grid-stride loop over the n16 uint4 in steps of kLoads: load kLoads uint4 into registers
  //      (guard each index), then count their 16 bytes each into this warp's histogram, merging
  //      runs of equal bytes in registers (keep the current bin and its run length);
  //   3. block 0 also counts the n_tail (< 16) bytes at `tail`; flush the last run;
  //   4. __syncthreads(), then each thread sums some bins over the warps and commits them to bins.
}

void histogram_coarsened(const unsigned char* d_in, std::size_t n, unsigned int* d_bins) {
  // TODO(student): zero the bins; if n > 0, split the input into n / 16 uint4 and a tail of n % 16
  //                bytes, launch histogram_coarsened_kernel on grid_stride_blocks(ceil(n16 / kLoads),
  //                kCoarseBlock) blocks (never 0: block 0 counts the tail) and check it (about 8 lines).
}

// ---------------------------------------------------------------------------------------------
// Challenge: as fast as you can make it. Timed against cub::DeviceHistogram::HistogramEven on
// uniform bytes (where bank conflicts between random bins limit shared atomics) and on the hot bin.
// ---------------------------------------------------------------------------------------------

// TODO(student): your fastest histogram_fast, with whatever kernels and helpers it needs. Ideas:
//   counters private to each lane (no bank conflicts), 16-byte loads, the next loads in flight while
//   you count the last ones, a fast path for runs, a grid that exactly fills the GPU.

void histogram_fast(const unsigned char* d_in, std::size_t n, unsigned int* d_bins) {
}
