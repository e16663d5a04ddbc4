// Lab 07: prefix sums (scan), from one block to any n, and a single pass at memory speed.
#include "scan.cuh"

#include <cuda/atomic>
#include <cuda_runtime.h>

#include <cstdint>

#include <cudalab/check.cuh>
#include <cudalab/launch.cuh>

constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;  // every lane of the warp takes part

// ---------------------------------------------------------------------------------------------
// Task 1: Hillis-Steele. In step d every element adds the one `offset` = 2^d places to its left, so
// after log2(kBlockScanTile) steps each holds the sum of everything up to it. Simple, but it does
// n log n additions where a sequential loop does n.
// ---------------------------------------------------------------------------------------------

constexpr int kHillisSteeleThreads = kBlockScanTile;  // one element per thread

__global__ void block_scan_hillis_steele_kernel(const int* in, int* out, std::size_t n) {
  __shared__ int s_buf[2][kBlockScanTile];  // two buffers: read one, write the other, swap
  const int t = threadIdx.x;
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * kBlockScanTile + t;
  // TODO(student): scan this block's tile inclusively in shared memory, one element per thread (0 past
  //                the end of the array), and write back the results that lie inside it. A step may
  //                read only what the previous step wrote: that is what the two buffers are for.
  //                Pitfall: every __syncthreads() must be reached by every thread of the block, so
  //                never put one inside a branch that only some threads take (about 14 lines).
}

void block_scan_hillis_steele(const int* d_in, int* d_out, std::size_t n) {
  if (n == 0) return;  // a grid of zero blocks is an invalid launch
  const auto tiles = cudalab::ceil_div<std::size_t>(n, kBlockScanTile);
  block_scan_hillis_steele_kernel<<<static_cast<unsigned>(tiles), kHillisSteeleThreads>>>(d_in, d_out, n);
  CUDA_CHECK_LAST();
}

// ---------------------------------------------------------------------------------------------
// Task 2: Blelloch. The up-sweep builds a tree of partial sums in place (n - 1 additions); the
// down-sweep replaces the root by 0 and pushes prefixes back down (n - 1 more). Work-efficient, and
// naturally exclusive. The tree's accesses have power-of-two strides, which pile up in a few of the
// 32 shared-memory banks; one padding word after every 32 spreads them out.
// ---------------------------------------------------------------------------------------------

constexpr int kBlellochThreads = kBlockScanTile / 2;  // two elements per thread
constexpr int kLogBanks = 5;                          // 32 banks, each 4 bytes wide

// Index i as stored in shared memory: one spare word after every 32 shifts the next 32 by one bank.
// (GPU Gems 3 adds a second term, i >> 2 * kLogBanks, that is 0 for every i of a 1024-element tile.)
__host__ __device__ constexpr int conflict_free(int i) { return i + (i >> kLogBanks); }

__global__ void block_scan_blelloch_kernel(const int* in, int* out, std::size_t n) {
  __shared__ int s_tree[conflict_free(kBlockScanTile - 1) + 1];
  const int t = threadIdx.x;
  const std::size_t base = static_cast<std::size_t>(blockIdx.x) * kBlockScanTile;
  // TODO(student): exclusive scan of this block's tile with an up-sweep and a down-sweep in s_tree, two
  //                elements per thread, picked so that each warp's loads stay coalesced (0 past the end;
  //                store only what lies inside the array). Every access to s_tree goes through
  //                conflict_free(), the root's too. Pitfalls: each level reads what other threads wrote
  //                in the level before, and the stores read the last level; a down-sweep node still
  //                needs its left child's old value after overwriting it (about 30 lines).
}

void block_scan_blelloch(const int* d_in, int* d_out, std::size_t n) {
  if (n == 0) return;
  const auto tiles = cudalab::ceil_div<std::size_t>(n, kBlockScanTile);
  block_scan_blelloch_kernel<<<static_cast<unsigned>(tiles), kBlellochThreads>>>(d_in, d_out, n);
  CUDA_CHECK_LAST();
}

// ---------------------------------------------------------------------------------------------
// Task 3: warp shuffles. Inside a warp, lanes read each other's registers with __shfl_up_sync: no
// shared memory and no barrier. A block then needs shared memory only for its 32 warp totals.
// ---------------------------------------------------------------------------------------------

constexpr int kShuffleThreads = kBlockScanTile;  // one element per thread
constexpr int kShuffleWarps = kShuffleThreads / kWarpSize;
static_assert(kShuffleWarps <= kWarpSize, "one warp scans the warp totals");

// Inclusive scan across the 32 lanes of a warp (Hillis-Steele in registers): after the step with
// distance d, lane l holds the sum of lanes l - 2d + 1 .. l.
__device__ int warp_inclusive_scan(int value) {
  // TODO(student): inclusive scan of `value` across the 32 lanes of the warp, in registers with
  //                __shfl_up_sync (no shared memory, no barrier). Lane 31 must end with the sum of all
  //                32 lanes: count the steps that takes. Pitfall: every lane named in kFullMask calls
  //                the shuffle in every step, even a lane that discards the result (about 6 lines).
  return value;
}

__global__ void block_scan_warp_shuffle_kernel(const int* in, int* out, std::size_t n) {
  __shared__ int s_warp_sums[kShuffleWarps];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * kBlockScanTile + threadIdx.x;
  // TODO(student): inclusive scan of the tile: scan each warp with warp_inclusive_scan, then let one warp
  //                scan the warp totals in s_warp_sums, so that every warp can add the sum of the warps
  //                before it; write only where i < n. Pitfalls: which lane holds its warp's total, a
  //                warp's offset leaves out its own total, and a __syncthreads() wherever one warp
  //                reads what another wrote (about 14 lines).
}

void block_scan_warp_shuffle(const int* d_in, int* d_out, std::size_t n) {
  if (n == 0) return;
  const auto tiles = cudalab::ceil_div<std::size_t>(n, kBlockScanTile);
  block_scan_warp_shuffle_kernel<<<static_cast<unsigned>(tiles), kShuffleThreads>>>(d_in, d_out, n);
  CUDA_CHECK_LAST();
}

// ---------------------------------------------------------------------------------------------
// Task 4: any n, by scan-then-propagate.
//   1. scan_tiles_kernel scans every tile on its own and writes each tile's total to tile_sums;
//   2. the tile totals are scanned (exclusive) the same way: one more level when there are more
//      totals than one tile holds, so the recursion covers any n;
//   3. add_tile_offsets_kernel adds to every element the sum of all the tiles before its tile.
// It reads and writes the data twice (about 4n words of traffic).
//
// The tile scan is the fast one: each thread holds kScanVecs int4 (16-byte) vectors in registers.
// A warp's part of the tile (its chunk) is laid out so that vector k of lane l holds the 4 items
// starting at 4 * (32k + l): one warp-wide int4 load reads 512 consecutive bytes.
// ---------------------------------------------------------------------------------------------

constexpr int kScanThreads = 256;
constexpr int kScanVecs = 4;                                  // int4 per thread: 16 items
constexpr int kChunkItemsPerVec = 4 * kWarpSize;              // items in one row of a warp's chunk
constexpr int kScanTile = kScanThreads * kScanVecs * 4;       // 4096 items per block

// TODO(student): optional helpers for a tile held in registers (load a warp's chunk, scan it with
//                warp shuffles, add an offset, store it); the challenge can reuse them (about 70 lines).

template <bool kInclusive>
__global__ void __launch_bounds__(kScanThreads)
    scan_tiles_kernel(const int* __restrict__ in, int* __restrict__ out, std::size_t n, int* tile_sums) {
  // TODO(student): scan this block's tile of kScanTile items (inclusive or exclusive, as kInclusive
  //                says) with the fastest block scan you have, several items per thread; write the
  //                tile's total to tile_sums[blockIdx.x] unless tile_sums is nullptr. Pitfalls: the
  //                tile's start passes 2^32 for huge n, so widen blockIdx.x before you multiply; the
  //                total covers the whole tile, in an exclusive scan too (about 20 lines with the
  //                helpers above).
}

// Block b adds tile_offsets[b + 1] to every element of tile b + 1 (tile 0's offset is 0: no block).
__global__ void __launch_bounds__(kScanThreads)
    add_tile_offsets_kernel(int* out, std::size_t n, const int* __restrict__ tile_offsets) {
  // TODO(student): read this block's tile offset once and add it to every item of its tile (int4 loads
  //                and stores where the tile is whole, item by item where the array ends). Pitfalls:
  //                which tile this block owns, given the launch described above, and a 64-bit tile
  //                start (about 8 lines with the helpers above).
}

// Rounds a count of ints up to whole int4, so every level's arrays stay 16-byte aligned.
constexpr std::size_t round_up_to_int4(std::size_t count) { return cudalab::ceil_div<std::size_t>(count, 4) * 4; }

std::size_t scan_temp_bytes(std::size_t n) {
  // TODO(student): the bytes of d_temp that scan_any uses for n items, every level of its recursion
  //                included. Count exactly the arrays scan_any places there, each rounded up with
  //                round_up_to_int4 so that the next one stays 16-byte aligned. Pitfall: scan_any must
  //                never use more than this returns (about 5 lines).
  return 0;
}

// Scans n items of d_in into d_out (n > 0), using d_temp as laid out by scan_temp_bytes.
template <bool kInclusive>
void scan_any(const int* d_in, int* d_out, std::size_t n, int* d_temp) {
  // TODO(student): scan-then-propagate as the chapter lays it out, scanning the tile totals with
  //                scan_any itself (the rest of d_temp is its scratch), and carving d_temp just as
  //                scan_temp_bytes counted it. Pitfalls: which kind of scan turns totals into offsets,
  //                whatever kInclusive is; one tile (n == kScanTile too) needs no second level, and a
  //                grid of 0 blocks is an invalid launch.
  //                Check every launch (about 14 lines).
}

void exclusive_scan(const int* d_in, int* d_out, std::size_t n, void* d_temp) {
  if (n == 0) return;
  scan_any<false>(d_in, d_out, n, static_cast<int*>(d_temp));
}

void inclusive_scan(const int* d_in, int* d_out, std::size_t n, void* d_temp) {
  if (n == 0) return;
  scan_any<true>(d_in, d_out, n, static_cast<int*>(d_temp));
}

// ---------------------------------------------------------------------------------------------
// Challenge: single-pass scan with decoupled look-back (Merrill & Garland, 2016). Each block scans
// its tile in registers, publishes the tile's total (its "aggregate") at once, then looks back over
// the tiles before it: it adds their aggregates until it meets one that already knows its inclusive
// prefix (the sum of everything up to and including it). Then it publishes its own inclusive prefix
// and writes its tile. The data is read once and written once (about 2n words).
// ---------------------------------------------------------------------------------------------

// TODO(student): your single-pass scan: tile status words, the look-back and the kernel, plus the
//                host code that clears the scratch and launches it (about 120 lines; the tile
//                helpers of Task 4 do much of the work). Pitfalls: a block may wait only for tiles
//                that running blocks own, the scratch must start clean in every call, and a reader
//                must never see a tile's flag without its value.

std::size_t scan_decoupled_temp_bytes(std::size_t n) {
  // TODO(student): the bytes your single-pass scan needs for n items (about 1 line).
  return 0;
}

void exclusive_scan_decoupled(const int* d_in, int* d_out, std::size_t n, void* d_temp) {
  // TODO(student): your single-pass exclusive scan (about 1 line).
}

void inclusive_scan_decoupled(const int* d_in, int* d_out, std::size_t n, void* d_temp) {
  // TODO(student): your single-pass inclusive scan (about 1 line).
}
