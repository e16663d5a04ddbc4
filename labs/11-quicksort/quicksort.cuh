// Lab 11 contract: the functions the tests call. Do not edit; implement them in quicksort.cu.
// Keys are 32-bit unsigned integers; every pointer is a device pointer (the d_ prefix).
#pragma once

// The largest segment block_sort handles: one block sorts it in shared memory (32 KiB of keys).
// quicksort hands every segment of at most this many keys to the same block sort.
constexpr int kBlockSortMax = 8192;

// quicksort's recursion depth: segments still larger than kBlockSortMax at this depth are sorted by a
// slow but safe fallback instead of being partitioned again. The device runtime nests at most 24
// grids deep (a grid launched by the host is level 0), so max_depth may not exceed kMaxDepthLimit.
constexpr int kDefaultMaxDepth = 20;
constexpr int kMaxDepthLimit = 20;

// Task 1: sorts d_in[0, n) into d_out[0, n) with one block, in shared memory. 0 <= n <= kBlockSortMax.
void block_sort(const unsigned* d_in, unsigned* d_out, int n);

// Task 2: a three-way partition of d_in[0, n) around pivot, by as many blocks as the input needs.
// Afterwards d_out[0, less) holds exactly the keys < pivot and d_out[n - greater, n) exactly the keys
// > pivot, each side in any order. The keys equal to the pivot need not be written: d_out[less, n - greater)
// may hold anything afterwards (quicksort fills that run with the pivot, the only value those keys have).
struct Split {
  int less;
  int greater;
};
Split partition_three_way(const unsigned* d_in, unsigned* d_out, int n, unsigned pivot);

// Tasks 3 and 4: sorts d_in[0, n) into d_out[0, n) with dynamic parallelism. d_in is not modified and
// must not overlap d_out. Returns after the sort has finished; throws cudalab::CudaError (carrying the
// error code) if any device-side launch failed, std::invalid_argument for invalid arguments.
struct QuicksortOptions {
  int max_depth = kDefaultMaxDepth;  // 0 .. kMaxDepthLimit
  // 0: raise cudaLimitDevRuntimePendingLaunchCount as far as this n needs. > 0: set exactly this limit
  // (the tests use a tiny one to check that failed device-side launches are reported).
  int pending_launch_limit = 0;
};
void quicksort(const unsigned* d_in, unsigned* d_out, int n, QuicksortOptions options = {});
