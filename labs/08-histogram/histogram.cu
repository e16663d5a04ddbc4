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
  // TODO(student): one thread per byte adds 1 to its byte's bin. Many threads may add to the same bin
  //   at once, and no count may be lost; threads past n do nothing, and n may pass 2^31 (about 2 lines).
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
  //   Each block counts its share of the input into a private kNumBins-bin histogram in shared memory,
  //   then adds it to bins once. Things to get right:
  //   - the grid is capped (grid_stride_blocks), so a thread keeps going until every byte has been
  //     counted exactly once, by some block;
  //   - __shared__ memory starts as garbage; make it work for any blockDim.x;
  //   - zeroing, counting and committing are separate phases: no thread may start one while another is
  //     still in the previous one, and a barrier must be reached by every thread of the block;
  //   - other blocks commit into the same bins at the same time (skip the bins that stayed zero).
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
  //   lines). Only letters count, either case, in groups of four (a-d, e-h, ..., y-z); every other
  //   byte is ignored. Pitfalls: char is signed, so bytes 128-255 read as char are negative, and no
  //   byte may ever reach past the 7 counters (the course notes' bug).
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
  //   1. one kNumBins-bin histogram per warp in shared memory (kCoarseWarps of them: more counters than
  //      the block has threads), all of it zero before anyone counts;
  //   2. a grid-stride loop over the n16 uint4 that issues kLoads loads before it counts any, with
  //      consecutive threads reading consecutive uint4; an index past n16 is neither read nor counted;
  //   3. each byte goes to this warp's histogram, but a run of equal bytes is merged in registers and
  //      added with one atomic; the run still open when the loop ends counts too;
  //   4. the n_tail (< 16) bytes at `tail` are counted exactly once in the whole grid;
  //   5. once every warp is done, sum the warps' histograms and commit them to bins.
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
