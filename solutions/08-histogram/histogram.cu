// Lab 08: a 256-bin byte histogram, from global atomics to private, coarsened and aggregated counts.
// Reference solution. Regions between BEGIN/END SOLUTION are removed from the student's copy, and
// "STUB:" lines become code there (python3 -m grader skeleton --write).
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
  // BEGIN SOLUTION
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&bins[in[i]], 1u);
  // END SOLUTION
}

void histogram_global(const unsigned char* d_in, std::size_t n, unsigned int* d_bins) {
  // TODO(student): zero the bins (cudaMemsetAsync), then, if n > 0, launch histogram_global_kernel
  //                with one thread per byte and check the launch (about 5 lines).
  // BEGIN SOLUTION
  CUDA_CHECK(cudaMemsetAsync(d_bins, 0, kNumBins * sizeof(unsigned int)));
  if (n == 0) return;  // the bins are zero, which is the right answer; a grid of 0 blocks is an error
  const std::size_t blocks = cudalab::ceil_div<std::size_t>(n, kBlock);
  histogram_global_kernel<<<blocks, kBlock>>>(d_in, n, d_bins);
  CUDA_CHECK_LAST();
  // END SOLUTION
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
  // BEGIN SOLUTION
  __shared__ unsigned int s_bins[kNumBins];
  for (int b = threadIdx.x; b < kNumBins; b += blockDim.x) s_bins[b] = 0;
  __syncthreads();  // no thread may count before every bin is zero

  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    atomicAdd(&s_bins[in[i]], 1u);
  }
  __syncthreads();  // every count of this block is in before any thread reads the bins to commit them

  for (int b = threadIdx.x; b < kNumBins; b += blockDim.x) {
    const unsigned int count = s_bins[b];
    if (count != 0) atomicAdd(&bins[b], count);
  }
  // END SOLUTION
}

void histogram_shared(const unsigned char* d_in, std::size_t n, unsigned int* d_bins) {
  // TODO(student): zero the bins, then, if n > 0, launch histogram_shared_kernel on
  //                grid_stride_blocks(n, kBlock) blocks of kBlock threads; check it (about 5 lines).
  // BEGIN SOLUTION
  CUDA_CHECK(cudaMemsetAsync(d_bins, 0, kNumBins * sizeof(unsigned int)));
  if (n == 0) return;
  histogram_shared_kernel<<<grid_stride_blocks(n, kBlock), kBlock>>>(d_in, n, d_bins);
  CUDA_CHECK_LAST();
  // END SOLUTION
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
  // BEGIN SOLUTION
  __shared__ unsigned int s_bins[kTextBins];
  if (threadIdx.x < kTextBins) s_bins[threadIdx.x] = 0;
  __syncthreads();

  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    unsigned int c = static_cast<unsigned char>(text[i]);
    if (c >= 'A' && c <= 'Z') c += 'a' - 'A';
    const unsigned int pos = c - 'a';  // unsigned: a byte below 'a' wraps to a huge value, so one test covers both ends
    if (pos < 26) atomicAdd(&s_bins[pos / 4], 1u);
  }
  __syncthreads();

  if (threadIdx.x < kTextBins && s_bins[threadIdx.x] != 0) atomicAdd(&bins[threadIdx.x], s_bins[threadIdx.x]);
  // END SOLUTION
}

void histogram_text(const char* d_text, std::size_t n, unsigned int* d_bins) {
  // TODO(student): zero the kTextBins bins, then, if n > 0, launch histogram_text_kernel; check it (about 5 lines).
  // BEGIN SOLUTION
  CUDA_CHECK(cudaMemsetAsync(d_bins, 0, kTextBins * sizeof(unsigned int)));
  if (n == 0) return;
  histogram_text_kernel<<<grid_stride_blocks(n, kBlock), kBlock>>>(d_text, n, d_bins);
  CUDA_CHECK_LAST();
  // END SOLUTION
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

// BEGIN SOLUTION
// Extends the current run (run_bin, run_len) by one byte, or flushes it and starts a new one.
__device__ __forceinline__ void count_byte(unsigned int* warp_bins, unsigned int b, unsigned int& run_bin,
                                           unsigned int& run_len) {
  if (b == run_bin) {
    ++run_len;
  } else {
    atomicAdd(&warp_bins[run_bin], run_len);  // adds 0 once, for the very first byte: harmless
    run_bin = b;
    run_len = 1;
  }
}

__device__ __forceinline__ void count_word(unsigned int* warp_bins, unsigned int word, unsigned int& run_bin,
                                           unsigned int& run_len) {
#pragma unroll
  for (int k = 0; k < 4; ++k) count_byte(warp_bins, (word >> (8 * k)) & 0xFFu, run_bin, run_len);
}

// END SOLUTION
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
  // BEGIN SOLUTION
  __shared__ unsigned int s_bins[kCoarseWarps][kNumBins];  // one private histogram per warp (8 KiB)
  for (int i = threadIdx.x; i < kCoarseWarps * kNumBins; i += kCoarseBlock) s_bins[i / kNumBins][i % kNumBins] = 0;
  __syncthreads();

  unsigned int* warp_bins = s_bins[threadIdx.x / kWarp];
  unsigned int run_bin = 0, run_len = 0;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * kCoarseBlock;
  for (std::size_t base = static_cast<std::size_t>(blockIdx.x) * kCoarseBlock + threadIdx.x; base < n16;
       base += kLoads * stride) {
    uint4 v[kLoads];
#pragma unroll
    for (int k = 0; k < kLoads; ++k) {  // consecutive threads read consecutive uint4: coalesced
      const std::size_t i = base + k * stride;
      v[k] = i < n16 ? in16[i] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int k = 0; k < kLoads; ++k) {
      if (base + k * stride < n16) {
        count_word(warp_bins, v[k].x, run_bin, run_len);
        count_word(warp_bins, v[k].y, run_bin, run_len);
        count_word(warp_bins, v[k].z, run_bin, run_len);
        count_word(warp_bins, v[k].w, run_bin, run_len);
      }
    }
  }
  if (blockIdx.x == 0 && threadIdx.x < n_tail) count_byte(warp_bins, tail[threadIdx.x], run_bin, run_len);
  atomicAdd(&warp_bins[run_bin], run_len);  // the last run
  __syncthreads();  // every warp's counts are in before any thread sums across warps

  for (int b = threadIdx.x; b < kNumBins; b += kCoarseBlock) {
    unsigned int sum = 0;
#pragma unroll
    for (int w = 0; w < kCoarseWarps; ++w) sum += s_bins[w][b];
    if (sum != 0) atomicAdd(&bins[b], sum);
  }
  // END SOLUTION
}

void histogram_coarsened(const unsigned char* d_in, std::size_t n, unsigned int* d_bins) {
  // TODO(student): zero the bins; if n > 0, split the input into n / 16 uint4 and a tail of n % 16
  //                bytes, launch histogram_coarsened_kernel on grid_stride_blocks(ceil(n16 / kLoads),
  //                kCoarseBlock) blocks (never 0: block 0 counts the tail) and check it (about 8 lines).
  // BEGIN SOLUTION
  CUDA_CHECK(cudaMemsetAsync(d_bins, 0, kNumBins * sizeof(unsigned int)));
  if (n == 0) return;
  const std::size_t n16 = n / 16;  // whole uint4; the last n % 16 bytes are the tail
  const int n_tail = static_cast<int>(n % 16);
  const int blocks = grid_stride_blocks(cudalab::ceil_div<std::size_t>(n16, kLoads), kCoarseBlock);
  histogram_coarsened_kernel<<<blocks, kCoarseBlock>>>(reinterpret_cast<const uint4*>(d_in), n16, d_in + 16 * n16,
                                                       n_tail, d_bins);
  CUDA_CHECK_LAST();
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// Challenge: as fast as you can make it. Timed against cub::DeviceHistogram::HistogramEven on
// uniform bytes (where bank conflicts between random bins limit shared atomics) and on the hot bin.
// ---------------------------------------------------------------------------------------------

// TODO(student): your fastest histogram_fast, with whatever kernels and helpers it needs. Ideas:
//   counters private to each lane (no bank conflicts), 16-byte loads, many loads in flight, a fast
//   path for runs, a grid where every warp finishes at the same time.
// BEGIN SOLUTION
// The reference gives every lane private counters, so no two threads ever update the same word.
// Each lane owns one 16-bit counter per bin (512 bytes per lane, 16 KiB per warp), two to a word,
// laid out so lane l only ever touches bank l: whatever the data, an update never conflicts with
// another lane's. An update is still an atomicAdd (of 1 << 16 * (b % 2) to the word holding bins b
// and b ^ 1): not for safety, but because it is one fire-and-forget instruction, where a load, add
// and store would make the next update to that word wait for the round trip. Before a 16-bit
// counter can overflow, and at the end, the warp adds its counters into 32-bit totals held in
// registers (lane l owns bin pairs l, l+32, l+64 and l+96). A uint4 of 16 equal bytes is counted
// with one add. Measured on an H200: about 90 % of CUB on uniform bytes, 95 % on the hot bin.
constexpr int kFastBlock = 64;                     // 2 warps x 16 KiB of counters = 32 KiB of shared memory
constexpr int kFastWarps = kFastBlock / kWarp;
constexpr int kPairs = kNumBins / 2;               // 128 words of two 16-bit counters per lane
constexpr int kFastLoads = 15;                     // uint4 per lane per round, all in flight at once
constexpr int kFastRound = kFastLoads * kWarp;     // uint4 per warp per round
constexpr int kFlushRounds = 256;                  // rounds between flushes: 256 * 15 * 16 = 61440 <= 65535
static_assert(kFastLoads * 16 * kFlushRounds <= 65535, "a 16-bit counter could overflow between flushes");

// Counts the 16 bytes of v into this lane's counters: bin b is half b % 2 of lane_words[(b / 2) * 32].
__device__ __forceinline__ void fast_count16(unsigned int* lane_words, const uint4 v) {
  const unsigned int first = v.x & 0xFFu;
  if (v.x == first * 0x01010101u && v.y == v.x && v.z == v.x && v.w == v.x) {
    atomicAdd(&lane_words[(first >> 1) * kWarp], 16u << (16 * (first & 1u)));  // 16 equal bytes: one add
    return;
  }
  const unsigned int words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const unsigned int b = (words[j] >> (8 * k)) & 0xFFu;
      atomicAdd(&lane_words[(b >> 1) * kWarp], 1u << (16 * (b & 1u)));
    }
  }
}

// Adds the warp's 16-bit counters into this lane's eight 32-bit totals and clears them. Every lane
// reads the 32 lanes' words of its four bin pairs, rotated by lane so the 32 reads hit 32 banks.
__device__ __forceinline__ void fast_flush(unsigned int* warp_words, int lane, unsigned int (&total)[8]) {
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    unsigned int* row = warp_words + (lane + kWarp * h) * kWarp;  // bins 2p, 2p+1 of all lanes, p = lane + 32h
    unsigned int lo = 0, hi = 0;
#pragma unroll 8
    for (int j = 0; j < kWarp; ++j) {
      const int src = (lane + j) & (kWarp - 1);
      const unsigned int w = row[src];
      row[src] = 0;
      lo += w & 0xFFFFu;
      hi += w >> 16;
    }
    total[2 * h] += lo;
    total[2 * h + 1] += hi;
  }
}

__global__ void __launch_bounds__(kFastBlock) histogram_fast_kernel(const uint4* __restrict__ in16, std::size_t n16,
                                                                    const unsigned char* __restrict__ tail, int n_tail,
                                                                    unsigned int* __restrict__ bins) {
  __shared__ __align__(16) unsigned int s_words[kFastWarps][kPairs * kWarp];
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  unsigned int* warp_words = s_words[warp];
  unsigned int* lane_words = warp_words + lane;  // this lane's column: bank = lane
  for (int p = 0; p < kPairs; ++p) lane_words[p * kWarp] = 0;
  unsigned int total[8] = {0, 0, 0, 0, 0, 0, 0, 0};

  // Each warp takes one contiguous slice of the input, equal to within one uint4, so every warp
  // finishes at the same time (a grid-stride loop in rounds this large leaves a ragged last round).
  const std::size_t warps = static_cast<std::size_t>(gridDim.x) * kFastWarps;
  const std::size_t global_warp = static_cast<std::size_t>(blockIdx.x) * kFastWarps + warp;
  const std::size_t begin = n16 * global_warp / warps;
  const std::size_t end = n16 * (global_warp + 1) / warps;
  // The loop bounds are the same for the 32 lanes, as the flush needs: it reads every lane's counters.
  int rounds = 0;
  for (std::size_t round = begin; round < end; round += kFastRound) {
    uint4 v[kFastLoads];
#pragma unroll
    for (int k = 0; k < kFastLoads; ++k) {  // the warp reads 512 contiguous bytes per load
      const std::size_t i = round + static_cast<std::size_t>(k) * kWarp + lane;
      v[k] = i < end ? in16[i] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int k = 0; k < kFastLoads; ++k) {
      if (round + static_cast<std::size_t>(k) * kWarp + lane < end) fast_count16(lane_words, v[k]);
    }
    if (++rounds == kFlushRounds) {
      rounds = 0;
      __syncwarp();  // every lane's counts are in shared memory before the lanes read each other's
      fast_flush(warp_words, lane, total);
      __syncwarp();  // every counter is cleared before any lane counts again
    }
  }
  __syncwarp();
  fast_flush(warp_words, lane, total);
  if (blockIdx.x == 0 && threadIdx.x < n_tail) atomicAdd(&bins[tail[threadIdx.x]], 1u);  // < 16 bytes

  __syncwarp();  // every lane has read its counters before they are overwritten
  // This warp's totals go to the first 256 words of its own counter space (only this warp used it).
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    warp_words[2 * (lane + kWarp * h)] = total[2 * h];
    warp_words[2 * (lane + kWarp * h) + 1] = total[2 * h + 1];
  }
  __syncthreads();  // all warps' totals are written before they are summed
  for (int b = threadIdx.x; b < kNumBins; b += kFastBlock) {
    unsigned int sum = 0;
#pragma unroll
    for (int w = 0; w < kFastWarps; ++w) sum += s_words[w][b];
    if (sum != 0) atomicAdd(&bins[b], sum);
  }
}
// END SOLUTION

void histogram_fast(const unsigned char* d_in, std::size_t n, unsigned int* d_bins) {
  // BEGIN SOLUTION
  CUDA_CHECK(cudaMemsetAsync(d_bins, 0, kNumBins * sizeof(unsigned int)));
  if (n == 0) return;
  static const int max_blocks = [] {
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, histogram_fast_kernel, kFastBlock, 0));
    return cudalab::sm_count() * std::max(per_sm, 1);
  }();
  const std::size_t n16 = n / 16;
  const std::size_t wanted = cudalab::ceil_div<std::size_t>(n16, static_cast<std::size_t>(kFastRound) * kFastWarps);
  const int blocks = static_cast<int>(std::clamp<std::size_t>(wanted, 1, max_blocks));
  histogram_fast_kernel<<<blocks, kFastBlock>>>(reinterpret_cast<const uint4*>(d_in), n16, d_in + 16 * n16,
                                                static_cast<int>(n % 16), d_bins);
  CUDA_CHECK_LAST();
  // END SOLUTION
}
