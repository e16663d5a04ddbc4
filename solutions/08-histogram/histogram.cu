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
  // TODO(student): one thread per byte adds 1 to its byte's bin. Many threads may add to the same bin
  //   at once, and no count may be lost; threads past n do nothing, and n may pass 2^31 (about 2 lines).
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
  //   Each block counts its share of the input into a private kNumBins-bin histogram in shared memory,
  //   then adds it to bins once. Things to get right:
  //   - the grid is capped (grid_stride_blocks), so a thread keeps going until every byte has been
  //     counted exactly once, by some block;
  //   - __shared__ memory starts as garbage; make it work for any blockDim.x;
  //   - zeroing, counting and committing are separate phases: no thread may start one while another is
  //     still in the previous one, and a barrier must be reached by every thread of the block;
  //   - other blocks commit into the same bins at the same time (skip the bins that stayed zero).
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
  //   lines). Only letters count, either case, in groups of four (a-d, e-h, ..., y-z); every other
  //   byte is ignored. Pitfalls: char is signed, so bytes 128-255 read as char are negative, and no
  //   byte may ever reach past the 7 counters (the course notes' bug).
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
  //   1. one kNumBins-bin histogram per warp in shared memory (kCoarseWarps of them: more counters than
  //      the block has threads), all of it zero before anyone counts;
  //   2. a grid-stride loop over the n16 uint4 that issues kLoads loads before it counts any, with
  //      consecutive threads reading consecutive uint4; an index past n16 is neither read nor counted;
  //   3. each byte goes to this warp's histogram, but a run of equal bytes is merged in registers and
  //      added with one atomic; the run still open when the loop ends counts too;
  //   4. the n_tail (< 16) bytes at `tail` are counted exactly once in the whole grid;
  //   5. once every warp is done, sum the warps' histograms and commit them to bins.
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
//   counters private to each lane (no bank conflicts), 16-byte loads, the next loads in flight while
//   you count the last ones, a fast path for runs, a grid that exactly fills the GPU.
// BEGIN SOLUTION
// The reference gives every lane 256 counters of its own, laid out so that lane l's counters all sit
// in bank l: in the warp's 32 KiB, bin b of lane l is word b * 32 + l. Whatever the data, the 32
// atomicAdds of one warp instruction hit 32 different banks, so they never conflict, and the hot bin
// costs no more than uniform bytes. (It is an atomicAdd although no other thread touches that word:
// one fire-and-forget instruction, where a load, add and store would wait for the load.) At 32 KiB per
// warp, 7 warps fill an sm_90 SM's shared memory, so the grid is one block of 7 warps per SM. Each
// thread keeps its next 8 uint4 loads in flight while it counts the previous 8, and counts a uint4 of
// 16 equal bytes with one add. Measured on an H200 at 2^28 bytes: about 130 % of CUB's rate on
// uniform bytes and 112 % on the hot bin.
constexpr int kFastMaxWarps = 7;                                      // 7 x 32 KiB = 224 KiB of shared memory
constexpr int kFastWarpBytes = kNumBins * kWarp * sizeof(unsigned int);  // 256 counters x 32 lanes = 32 KiB
constexpr int kFastLoads = 8;                                         // uint4 per thread per step

// Loads the kFastLoads uint4 of one step (zeros past the end). __ldcs: each byte is read once, so
// mark it evict-first and leave the cache to others.
__device__ __forceinline__ void fast_load(uint4 (&v)[kFastLoads], const uint4* __restrict__ in16, std::size_t base,
                                          std::size_t stride, std::size_t n16) {
#pragma unroll
  for (int k = 0; k < kFastLoads; ++k) {
    const std::size_t i = base + k * stride;  // consecutive threads read consecutive uint4: coalesced
    v[k] = i < n16 ? __ldcs(in16 + i) : make_uint4(0, 0, 0, 0);
  }
}

// Counts the 16 bytes of v into this lane's counters (bin b is lane_counters[b * 32]).
__device__ __forceinline__ void fast_count16(unsigned int* lane_counters, const uint4 v) {
  const unsigned int first = v.x & 0xFFu;
  if (v.x == first * 0x01010101u && v.y == v.x && v.z == v.x && v.w == v.x) {
    atomicAdd(&lane_counters[first * kWarp], 16u);  // 16 equal bytes: one add
    return;
  }
  const unsigned int words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const unsigned int b = __byte_perm(words[j], 0, 0x4440 + k);  // byte k of the word, zero-extended
      atomicAdd(&lane_counters[b * kWarp], 1u);
    }
  }
}

__global__ void __launch_bounds__(kFastMaxWarps * kWarp) histogram_fast_kernel(const uint4* __restrict__ in16,
                                                                                std::size_t n16,
                                                                                const unsigned char* __restrict__ tail,
                                                                                int n_tail,
                                                                                unsigned int* __restrict__ bins) {
  extern __shared__ uint4 s_counters16[];  // (blockDim.x / 32) warps x 256 bins x 32 lanes, as uint4 to zero it
  unsigned int* s_counters = reinterpret_cast<unsigned int*>(s_counters16);
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  unsigned int* warp_counters = s_counters + warp * kNumBins * kWarp;
  unsigned int* lane_counters = warp_counters + lane;  // this lane's column: bank = lane

  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t base = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  uint4 v[kFastLoads];
  fast_load(v, in16, base, stride, n16);  // the first loads travel while the counters are zeroed
  for (int i = threadIdx.x; i < warps * kNumBins * kWarp / 4; i += blockDim.x) s_counters16[i] = make_uint4(0, 0, 0, 0);
  __syncthreads();  // every counter is zero before any thread counts

  for (; base < n16; base += kFastLoads * stride) {
    uint4 next[kFastLoads];
    fast_load(next, in16, base + kFastLoads * stride, stride, n16);  // next step's loads go out first
#pragma unroll
    for (int k = 0; k < kFastLoads; ++k) {
      if (base + k * stride < n16) fast_count16(lane_counters, v[k]);
    }
#pragma unroll
    for (int k = 0; k < kFastLoads; ++k) v[k] = next[k];
  }
  if (blockIdx.x == 0 && threadIdx.x < n_tail) atomicAdd(&lane_counters[tail[threadIdx.x] * kWarp], 1u);  // < 16 bytes
  __syncwarp();  // every lane's counts are in before the lanes read each other's columns

  // Lane l sums the 32 columns of bins l, l + 32, ..., l + 224. Starting each row at column l puts the
  // 32 reads of every step in 32 different banks.
  unsigned int total[kNumBins / kWarp];
#pragma unroll
  for (int i = 0; i < kNumBins / kWarp; ++i) {
    const unsigned int* row = warp_counters + (lane + kWarp * i) * kWarp;
    unsigned int sum = 0;
#pragma unroll 8
    for (int j = 0; j < kWarp; ++j) sum += row[(lane + j) % kWarp];
    total[i] = sum;
  }
  __syncwarp();  // every lane has read its rows before the first 256 words are overwritten
  // This warp's totals go to the first 256 words of its own counters (only this warp used them).
#pragma unroll
  for (int i = 0; i < kNumBins / kWarp; ++i) warp_counters[lane + kWarp * i] = total[i];
  __syncthreads();  // all warps' totals are written before they are summed
  for (int b = threadIdx.x; b < kNumBins; b += blockDim.x) {
    unsigned int sum = 0;
    for (int w = 0; w < warps; ++w) sum += s_counters[w * kNumBins * kWarp + b];
    if (sum != 0) atomicAdd(&bins[b], sum);
  }
}
// END SOLUTION

void histogram_fast(const unsigned char* d_in, std::size_t n, unsigned int* d_bins) {
  // BEGIN SOLUTION
  CUDA_CHECK(cudaMemsetAsync(d_bins, 0, kNumBins * sizeof(unsigned int)));
  if (n == 0) return;
  // As many 32 KiB warps as one block may have (7 on sm_90, fewer on GPUs with less shared memory),
  // and as many such blocks as fit on the GPU at once (one per SM on sm_90).
  struct Config {
    int threads;
    int smem;
    int max_blocks;
  };
  static const Config config = [] {
    int device = 0, optin = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    const int warps = std::clamp(optin / kFastWarpBytes, 1, kFastMaxWarps);
    Config c{warps * kWarp, warps * kFastWarpBytes, 0};
    // Over 48 KiB of dynamic shared memory per block must be asked for explicitly.
    CUDA_CHECK(cudaFuncSetAttribute(histogram_fast_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, c.smem));
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, histogram_fast_kernel, c.threads, c.smem));
    c.max_blocks = cudalab::sm_count() * std::max(per_sm, 1);
    return c;
  }();
  const std::size_t n16 = n / 16;  // whole uint4; the last n % 16 bytes are the tail
  const std::size_t wanted = cudalab::ceil_div<std::size_t>(n16, static_cast<std::size_t>(config.threads) * kFastLoads);
  const int blocks = static_cast<int>(std::clamp<std::size_t>(wanted, 1, config.max_blocks));
  histogram_fast_kernel<<<blocks, config.threads, config.smem>>>(reinterpret_cast<const uint4*>(d_in), n16,
                                                                 d_in + 16 * n16, static_cast<int>(n % 16), d_bins);
  CUDA_CHECK_LAST();
  // END SOLUTION
}
