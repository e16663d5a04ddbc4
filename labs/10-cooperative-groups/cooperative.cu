// Lab 10: cooperative groups. Tiles and blocks as objects, warp vote, and a barrier across the grid.
#include "cooperative.cuh"

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cuda_runtime.h>

#include <algorithm>

#include <cudalab/check.cuh>
#include <cudalab/launch.cuh>

namespace cg = cooperative_groups;

constexpr int kThreads = 256;                          // threads per block in every kernel of this lab
constexpr int kTilesPerBlock = kThreads / kTileSize;
[[maybe_unused]] constexpr unsigned kFullMask = 0xffffffffu;  // all 32 lanes take part in a *_sync call
static_assert(kTilesPerBlock <= kTileSize, "block_reduce_sum: one tile must hold one sum per tile");
static_assert(kBlockItems % kThreads == 0, "block_sums: every thread loads the same number of values");

// ---------------------------------------------------------------------------------------------
// Task 1: tile reductions. cg::tiled_partition<32>(block) splits the block into warp-sized tiles;
// cg::reduce(tile, v, cg::plus<int>()) returns the sum of v over the tile to every thread of it
// (on sm_80 and later, one redux.sync instruction for int). Every thread of the tile must call it.
// ---------------------------------------------------------------------------------------------

__global__ void tile_sums_kernel(const int* in, int* out, std::size_t n) {
  // TODO(student): one value per thread. Sum each tiled_partition<kTileSize> of the block with
  //                cg::reduce; one thread per tile stores the sum in out, at the tile's number in the
  //                whole array (not its rank in the block). Pitfalls: every lane must call cg::reduce,
  //                a lane past n too (with 0, reading nothing); a short last tile's sum must still be
  //                written, so pick a writer lane that such a tile has (about 8 lines).
}

void tile_sums(const int* d_in, int* d_out, std::size_t n) {
  if (n == 0) return;
  // TODO(student): launch tile_sums_kernel with enough blocks of kThreads to cover n, and check
  //                (about 3 lines).
}

// ---------------------------------------------------------------------------------------------
// Task 2: block reductions. Each tile reduces its values, its first thread leaves the tile's sum in
// shared memory, the block meets at block.sync(), and the first tile reduces the tile sums.
// ---------------------------------------------------------------------------------------------

// The sum of v over the block (kThreads threads), valid in thread 0. Every thread must call it.
// It uses shared memory: a caller that calls it twice needs a block.sync() in between.
__device__ float block_reduce_sum(const cg::thread_block& block, float v) {
  // TODO(student): two levels: each tile of kTileSize threads reduces its values, the tile sums meet in
  //                a __shared__ float[kTilesPerBlock] (one slot per tile: which rank tells tiles apart?),
  //                then one tile reduces them. Pitfalls: every thread of the block must reach a barrier
  //                between the stores and the reads; only kTilesPerBlock slots exist (about 10 lines).
  return v;
}

__global__ void block_sums_kernel(const float* in, float* out, std::size_t n) {
  // TODO(student): block b sums its own chunk of kBlockItems consecutive values into out[b]: each thread
  //                adds its share (neighbouring threads on neighbouring values keep loads coalesced), then
  //                block_reduce_sum combines them, valid in thread 0 only. Pitfalls: add nothing outside
  //                your chunk, and nothing at or past n (the last chunk may be partial) (about 8 lines).
}

void block_sums(const float* d_in, float* d_out, std::size_t n) {
  if (n == 0) return;
  // TODO(student): one block of kThreads per kBlockItems values; launch and check (about 3 lines).
}

// ---------------------------------------------------------------------------------------------
// Task 3: warp vote. __ballot_sync(mask, p) gives every lane a 32-bit word whose bit k is lane k's
// predicate; __popc counts its ones. __any_sync / __all_sync return whether p holds for some / every
// lane. A lane past the end of the array still votes (all 32 lanes are in the mask), so its vote must
// be the neutral one: false for "any" and for counting, true for "all".
// ---------------------------------------------------------------------------------------------

__global__ void count_above_kernel(const float* in, std::size_t n, float threshold, unsigned int* count) {
  // TODO(student): count the values above threshold with one atomic per warp, not one per thread:
  //                the warp votes, and one lane adds how many lanes said yes. Pitfall: all 32 lanes
  //                vote, those past n too, with the vote that changes nothing (about 5 lines).
}

void count_above(const float* d_in, std::size_t n, float threshold, unsigned int* d_count) {
  // TODO(student): set *d_count to 0 (cudaMemsetAsync), then launch count_above_kernel over n values
  //                and check (about 5 lines).
}

__global__ void warp_any_all_kernel(const float* in, std::size_t n, float threshold, int* any, int* all) {
  // TODO(student): for each group of 32 values (group = i / 32), whether any and whether all are
  //                above threshold, decided by one warp vote each and written once per group that
  //                exists. Pitfall: a lane past n votes too, and must sway neither answer (about 7 lines).
}

void warp_any_all(const float* d_in, std::size_t n, float threshold, int* d_any, int* d_all) {
  if (n == 0) return;
  // TODO(student): launch warp_any_all_kernel over n values and check (about 3 lines).
}

// ---------------------------------------------------------------------------------------------
// Task 4: the size of a cooperative grid. grid.sync() only works if every block of the grid is on
// the GPU at the same time (a block that waits for one that has not started would wait forever), so
// cudaLaunchCooperativeKernel refuses a grid larger than what fits at once:
// blocks per SM for this kernel and block shape (the occupancy API) times the number of SMs.
// ---------------------------------------------------------------------------------------------

int cooperative_grid_blocks(const void* kernel, int block_threads, std::size_t dynamic_smem_bytes) {
  // TODO(student): how many blocks of this kernel, at this block size and dynamic shared memory, are
  //                resident on the whole GPU at once: the occupancy API answers per SM. Pitfall: ask for
  //                this kernel and these sizes, not a rule of thumb (about 4 lines).
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Given: the sum of this thread's share of in[0, n), read with a grid-stride loop of 16-byte loads,
// kUnroll of them in flight at a time (lab 06, step 5). The n % 4 values at the end go to the first
// threads of the grid.
// ---------------------------------------------------------------------------------------------

constexpr int kUnroll = 4;

__device__ float grid_stride_sum(const float* __restrict__ in, std::size_t n) {
  const float4* in4 = reinterpret_cast<const float4*>(in);
  const std::size_t n4 = n / 4;
  const std::size_t thread = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  float sum = 0.0f;
  std::size_t i = thread;
  for (; i + (kUnroll - 1) * stride < n4; i += kUnroll * stride) {
    float4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = in4[i + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) sum += (v[u].x + v[u].y) + (v[u].z + v[u].w);
  }
  for (; i < n4; i += stride) {
    const float4 v = in4[i];
    sum += (v.x + v.y) + (v.z + v.w);
  }
  if (thread < n % 4) sum += in[4 * n4 + thread];
  return sum;
}

// Given: the blocks of a cooperative launch for n values: all that fit on the GPU at once (`resident`,
// from task 4), but no more than the data needs (about one float4 per thread).
static std::size_t coop_blocks(int resident, std::size_t n) {
  const std::size_t needed = std::max<std::size_t>(1, cudalab::ceil_div<std::size_t>(n, 4 * kThreads));
  return std::min(static_cast<std::size_t>(std::max(resident, 0)), needed);
}

// ---------------------------------------------------------------------------------------------
// Task 5: a one-kernel reduction with a grid-wide barrier. Each block stores its partial sum; after
// grid.sync() every partial is written and visible to every block, so block 0 adds them up. No
// second launch and no atomic counter: the barrier does what the kernel boundary (lab 06, steps 1-4)
// or the last-block ticket (lab 06, step 5) did.
// ---------------------------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads)
    coop_reduce_kernel(const float* __restrict__ in, float* out, std::size_t n, float* partials) {
  // TODO(student): each block reduces its grid-stride share (grid_stride_sum, block_reduce_sum) to one
  //                partial in partials; the whole grid meets at a barrier (cg::this_grid()); then block 0
  //                adds all gridDim.x partials and writes *out. Pitfalls: every thread of every block must
  //                reach the grid barrier (no return before it); there can be more partials than a block
  //                has threads (about 12 lines).
}

void coop_reduce(const float* d_in, float* d_out, std::size_t n, float* d_partials) {
  // TODO(student): the resident grid of coop_reduce_kernel with kThreads per block and no dynamic
  //                shared memory (task 4; it never changes, so keep it in a static local);
  //                blocks = coop_blocks(resident, n); put the addresses of the four arguments in a
  //                void* array; cudaLaunchCooperativeKernel inside CUDA_CHECK (a grid that is too large
  //                is an error to report, never a silent hang) (about 6 lines).
}

// ---------------------------------------------------------------------------------------------
// Task 6: subtract the mean, in one kernel. Phase 1 as in task 5; after grid.sync() EVERY block adds
// the partials itself (in the same order, so every block gets the very same mean) and subtracts it
// from its share of the array. Without a grid barrier this takes two kernel launches.
// ---------------------------------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads)
    subtract_mean_kernel(const float* __restrict__ in, float* out, std::size_t n, float* partials) {
  // TODO(student): phase 1 as in coop_reduce_kernel. After the grid barrier every block works out the
  //                mean of all n values itself, adding the partials in the same order as every other
  //                block, and subtracts it from its share of the array. Pitfalls: block_reduce_sum's
  //                result is in thread 0 only, so share it through shared memory, read after a barrier;
  //                the grid has far fewer threads than there are values (about 18 lines).
}

void subtract_mean(const float* d_in, float* d_out, std::size_t n, float* d_partials) {
  // TODO(student): as coop_reduce, with subtract_mean_kernel (about 6 lines).
}
