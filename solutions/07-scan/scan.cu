// Lab 07: prefix sums (scan), from one block to any n, and a single pass at memory speed.
// Reference solution. Regions between BEGIN/END SOLUTION are removed from the student's copy, and
// "STUB:" lines become code there (python3 -m grader skeleton --write).
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
  // BEGIN SOLUTION
  s_buf[0][t] = i < n ? in[i] : 0;  // past the end: 0, the identity, so a partial tile scans correctly
  __syncthreads();                  // every element is in shared memory before anyone reads a neighbour
  int cur = 0;
  for (int offset = 1; offset < kBlockScanTile; offset *= 2) {
    int sum = s_buf[cur][t];
    if (t >= offset) sum += s_buf[cur][t - offset];
    s_buf[cur ^ 1][t] = sum;  // the other buffer: threads still in this step keep reading s_buf[cur]
    __syncthreads();          // the next step reads what every thread wrote in this one
    cur ^= 1;
  }
  if (i < n) out[i] = s_buf[cur][t];
  // END SOLUTION
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
  // BEGIN SOLUTION
  const int a = t;
  const int b = t + kBlellochThreads;
  s_tree[conflict_free(a)] = base + a < n ? in[base + a] : 0;
  s_tree[conflict_free(b)] = base + b < n ? in[base + b] : 0;

  // Up-sweep: at stride s, `right` = s(2t + 2) - 1 gains the sum of the s elements ending at `left`.
  int stride = 1;
  for (int active = kBlellochThreads; active > 0; active /= 2) {
    __syncthreads();  // the level below (or the loads) is complete before this level reads it
    if (t < active) {
      const int left = stride * (2 * t + 1) - 1;
      const int right = stride * (2 * t + 2) - 1;
      s_tree[conflict_free(right)] += s_tree[conflict_free(left)];
    }
    stride *= 2;
  }

  // Down-sweep: each node passes its prefix to its left child, and prefix + left sum to its right.
  if (t == 0) s_tree[conflict_free(kBlockScanTile - 1)] = 0;  // the root's prefix is the identity
  for (int active = 1; active < kBlockScanTile; active *= 2) {
    stride /= 2;
    __syncthreads();  // the level above is complete (and the root is cleared) before this level
    if (t < active) {
      const int left = stride * (2 * t + 1) - 1;
      const int right = stride * (2 * t + 2) - 1;
      const int left_sum = s_tree[conflict_free(left)];
      s_tree[conflict_free(left)] = s_tree[conflict_free(right)];
      s_tree[conflict_free(right)] += left_sum;
    }
  }
  __syncthreads();  // the last level wrote elements that other threads store
  if (base + a < n) out[base + a] = s_tree[conflict_free(a)];
  if (base + b < n) out[base + b] = s_tree[conflict_free(b)];
  // END SOLUTION
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
  // BEGIN SOLUTION
  const int lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int d = 1; d < kWarpSize; d *= 2) {
    const int below = __shfl_up_sync(kFullMask, value, d);
    if (lane >= d) value += below;
  }
  return value;
  // END SOLUTION
  // STUB: return value;
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
  // BEGIN SOLUTION
  int value = warp_inclusive_scan(i < n ? in[i] : 0);
  if (lane == kWarpSize - 1) s_warp_sums[warp] = value;  // the last lane holds the warp's total
  __syncthreads();  // every warp's total is written before warp 0 reads them all
  if (warp == 0) {
    const int total = lane < kShuffleWarps ? s_warp_sums[lane] : 0;
    const int before = warp_inclusive_scan(total) - total;  // exclusive: the sum of the warps before
    if (lane < kShuffleWarps) s_warp_sums[lane] = before;
  }
  __syncthreads();  // the offsets are written before any warp reads its own
  value += s_warp_sums[warp];
  if (i < n) out[i] = value;
  // END SOLUTION
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
// BEGIN SOLUTION

// How many items of the chunk of kVecs rows starting at `begin` lie inside the array: all of them,
// some (the array ends in this chunk), or none (the chunk starts past the end).
template <int kVecs>
__device__ int items_in_chunk(std::size_t begin, std::size_t n) {
  constexpr int kChunkItems = kVecs * kChunkItemsPerVec;
  if (begin >= n) return 0;
  return n - begin >= kChunkItems ? kChunkItems : static_cast<int>(n - begin);
}

// Loads one warp's chunk of kVecs rows into v; items at or past n read as 0 (the identity). A lane's
// vector that lies wholly inside the array is one int4 load; one that reaches past the end is read
// item by item. One loop for both cases, with 32-bit offsets, keeps the register count low.
template <int kVecs>
__device__ void load_chunk(const int* in, std::size_t begin, std::size_t n, int4 (&v)[kVecs]) {
  const int lane = threadIdx.x % kWarpSize;
  const int valid = items_in_chunk<kVecs>(begin, n);
  const int* chunk = in + begin;  // dereferenced only below `valid`
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int j = 4 * (k * kWarpSize + lane);  // this lane's 4 items of row k start at chunk[j]
    if (j + 4 <= valid) {
      v[k] = *reinterpret_cast<const int4*>(chunk + j);
    } else {
      v[k] = make_int4(j < valid ? chunk[j] : 0, j + 1 < valid ? chunk[j + 1] : 0,
                       j + 2 < valid ? chunk[j + 2] : 0, j + 3 < valid ? chunk[j + 3] : 0);
    }
  }
}

template <int kVecs>
__device__ void store_chunk(int* out, std::size_t begin, std::size_t n, const int4 (&v)[kVecs]) {
  const int lane = threadIdx.x % kWarpSize;
  const int valid = items_in_chunk<kVecs>(begin, n);
  int* chunk = out + begin;
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int j = 4 * (k * kWarpSize + lane);
    if (j + 4 <= valid) {
      *reinterpret_cast<int4*>(chunk + j) = v[k];
    } else {
      if (j < valid) chunk[j] = v[k].x;
      if (j + 1 < valid) chunk[j + 1] = v[k].y;
      if (j + 2 < valid) chunk[j + 2] = v[k].z;
      if (j + 3 < valid) chunk[j + 3] = v[k].w;
    }
  }
}

template <int kVecs>
__device__ void add_to_chunk(int4 (&v)[kVecs], int offset) {
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    v[k].x += offset;
    v[k].y += offset;
    v[k].z += offset;
    v[k].w += offset;
  }
}

// Scans a warp's chunk in registers, as if it started at 0, and returns the chunk's total (in every
// lane). Each lane scans its own 4-item vectors; then each row is scanned across the warp (the kVecs
// row scans are independent, so their shuffles overlap); rows before row k add their totals.
template <bool kInclusive, int kVecs>
__device__ int scan_chunk(int4 (&v)[kVecs]) {
  const int lane = threadIdx.x % kWarpSize;
  int row_scan[kVecs];
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    v[k].y += v[k].x;  // v[k] becomes the inclusive scan of its own 4 items
    v[k].z += v[k].y;
    v[k].w += v[k].z;
    row_scan[k] = v[k].w;
  }
#pragma unroll
  for (int d = 1; d < kWarpSize; d *= 2) {
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      const int below = __shfl_up_sync(kFullMask, row_scan[k], d);
      if (lane >= d) row_scan[k] += below;
    }
  }
  int rows_before = 0;  // the sum of rows 0 .. k-1 of the chunk
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int prefix = rows_before + row_scan[k] - v[k].w;  // everything in the chunk before v[k].x
    rows_before += __shfl_sync(kFullMask, row_scan[k], kWarpSize - 1);
    if (kInclusive) {
      v[k] = make_int4(prefix + v[k].x, prefix + v[k].y, prefix + v[k].z, prefix + v[k].w);
    } else {
      v[k] = make_int4(prefix, prefix + v[k].x, prefix + v[k].y, prefix + v[k].z);
    }
  }
  return rows_before;
}

// END SOLUTION

template <bool kInclusive>
__global__ void __launch_bounds__(kScanThreads)
    scan_tiles_kernel(const int* __restrict__ in, int* __restrict__ out, std::size_t n, int* tile_sums) {
  // TODO(student): scan this block's tile of kScanTile items (inclusive or exclusive, as kInclusive
  //                says) with the fastest block scan you have, several items per thread; write the
  //                tile's total to tile_sums[blockIdx.x] unless tile_sums is nullptr. Pitfalls: the
  //                tile's start passes 2^32 for huge n, so widen blockIdx.x before you multiply; the
  //                total covers the whole tile, in an exclusive scan too (about 20 lines with the
  //                helpers above).
  // BEGIN SOLUTION
  constexpr int kWarps = kScanThreads / kWarpSize;
  __shared__ int s_warp_offsets[kWarps];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const std::size_t chunk_begin = static_cast<std::size_t>(blockIdx.x) * kScanTile +
                                  static_cast<std::size_t>(warp) * kScanVecs * kChunkItemsPerVec;
  int4 v[kScanVecs];
  load_chunk(in, chunk_begin, n, v);
  const int chunk_total = scan_chunk<kInclusive>(v);
  if (lane == 0) s_warp_offsets[warp] = chunk_total;
  __syncthreads();  // every warp's total is written before warp 0 scans them
  if (warp == 0) {
    const int total = lane < kWarps ? s_warp_offsets[lane] : 0;
    const int inclusive = warp_inclusive_scan(total);
    if (lane < kWarps) s_warp_offsets[lane] = inclusive - total;
    if (lane == kWarpSize - 1 && tile_sums != nullptr) tile_sums[blockIdx.x] = inclusive;  // tile total
  }
  __syncthreads();  // the warp offsets are written before any warp reads its own
  add_to_chunk(v, s_warp_offsets[warp]);
  store_chunk(out, chunk_begin, n, v);
  // END SOLUTION
}

// Block b adds tile_offsets[b + 1] to every element of tile b + 1 (tile 0's offset is 0: no block).
__global__ void __launch_bounds__(kScanThreads)
    add_tile_offsets_kernel(int* out, std::size_t n, const int* __restrict__ tile_offsets) {
  // TODO(student): read this block's tile offset once and add it to every item of its tile (int4 loads
  //                and stores where the tile is whole, item by item where the array ends). Pitfalls:
  //                which tile this block owns, given the launch described above, and a 64-bit tile
  //                start (about 8 lines with the helpers above).
  // BEGIN SOLUTION
  const std::size_t tile = static_cast<std::size_t>(blockIdx.x) + 1;
  const int offset = tile_offsets[tile];
  const int warp = threadIdx.x / kWarpSize;
  const std::size_t chunk_begin =
      tile * kScanTile + static_cast<std::size_t>(warp) * kScanVecs * kChunkItemsPerVec;
  int4 v[kScanVecs];
  load_chunk(out, chunk_begin, n, v);
  add_to_chunk(v, offset);
  store_chunk(out, chunk_begin, n, v);
  // END SOLUTION
}

// Rounds a count of ints up to whole int4, so every level's arrays stay 16-byte aligned.
constexpr std::size_t round_up_to_int4(std::size_t count) { return cudalab::ceil_div<std::size_t>(count, 4) * 4; }

std::size_t scan_temp_bytes(std::size_t n) {
  // TODO(student): the bytes of d_temp that scan_any uses for n items, every level of its recursion
  //                included. Count exactly the arrays scan_any places there, each rounded up with
  //                round_up_to_int4 so that the next one stays 16-byte aligned. Pitfall: scan_any must
  //                never use more than this returns (about 5 lines).
  // BEGIN SOLUTION
  std::size_t bytes = 0;
  for (std::size_t tiles = cudalab::ceil_div<std::size_t>(n, kScanTile); tiles > 1;
       tiles = cudalab::ceil_div<std::size_t>(tiles, kScanTile)) {
    bytes += 2 * round_up_to_int4(tiles) * sizeof(int);
  }
  return bytes;
  // END SOLUTION
  // STUB: return 0;
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
  // BEGIN SOLUTION
  const std::size_t tiles = cudalab::ceil_div<std::size_t>(n, kScanTile);
  if (tiles == 1) {
    scan_tiles_kernel<kInclusive><<<1, kScanThreads>>>(d_in, d_out, n, nullptr);
    CUDA_CHECK_LAST();
    return;
  }
  int* d_tile_sums = d_temp;
  int* d_tile_offsets = d_tile_sums + round_up_to_int4(tiles);
  int* d_deeper_temp = d_tile_offsets + round_up_to_int4(tiles);
  scan_tiles_kernel<kInclusive><<<static_cast<unsigned>(tiles), kScanThreads>>>(d_in, d_out, n, d_tile_sums);
  CUDA_CHECK_LAST();
  // Exclusive, whatever the outer scan is: tile t's offset is the sum of tiles 0 .. t-1.
  scan_any<false>(d_tile_sums, d_tile_offsets, tiles, d_deeper_temp);
  add_tile_offsets_kernel<<<static_cast<unsigned>(tiles - 1), kScanThreads>>>(d_out, n, d_tile_offsets);
  CUDA_CHECK_LAST();
  // END SOLUTION
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
// BEGIN SOLUTION

constexpr int kLookBackThreads = 256;
constexpr int kLookBackVecs = 8;  // int4 per thread: 32 items, a tile of 8192
// Blocks that must fit on one SM at once: it caps the registers at 65536 / (4 * 256) = 64 per thread.
// Four tiles in flight per SM keep enough loads outstanding to run near memory speed.
constexpr int kLookBackMinBlocksPerSm = 4;
// Pauses of the look-back warp (CUB's Hopper tuning uses about the same). After publishing its
// aggregate it sleeps kLookBackDelayNs before its first look: by then its predecessors have mostly
// published their prefixes, so one window usually ends the search, and fewer status loads compete
// with the data loads in L2. While a predecessor is still empty it sleeps kPollDelayNs between polls.
// Measured at 2^28 on the H200: 0.91x CUB with 64 ns polls and no first pause, 1.0x with these.
constexpr int kLookBackDelayNs = 1200;
constexpr int kPollDelayNs = 650;

// A tile's status is one 64-bit word: the flag in the high half, the value in the low half. One store
// publishes both, so a reader never sees a flag with a stale value, and the status needs no fence.
constexpr unsigned kStatusEmpty = 0;      // nothing published yet (the scratch is cleared to 0)
constexpr unsigned kStatusAggregate = 1;  // value = the sum of this tile alone
constexpr unsigned kStatusPrefix = 2;     // value = the sum of all tiles up to and including this one
using StatusWord = unsigned long long;
using StatusRef = cuda::atomic_ref<StatusWord, cuda::thread_scope_device>;

__device__ StatusWord make_status(unsigned flag, int value) {
  return (static_cast<StatusWord>(flag) << 32) | static_cast<unsigned>(value);
}
__device__ unsigned status_flag(StatusWord word) { return static_cast<unsigned>(word >> 32); }
__device__ int status_value(StatusWord word) { return static_cast<int>(static_cast<unsigned>(word)); }

// Relaxed atomics at device scope: the loads go to L2 (never a stale L1 copy) and cannot be torn.
__device__ StatusWord load_status(StatusWord* status, long long tile) {
  return StatusRef(status[tile]).load(cuda::std::memory_order_relaxed);
}
__device__ void store_status(StatusWord* status, long long tile, unsigned flag, int value) {
  StatusRef(status[tile]).store(make_status(flag, value), cuda::std::memory_order_relaxed);
}

// Called by one whole warp for tile > 0: returns the sum of all tiles before `tile`. Lane l watches
// tile window_end - 32 + l, so the warp inspects 32 predecessors at once, nearest in lane 31.
__device__ int look_back(StatusWord* status, long long tile) {
  const int lane = threadIdx.x % kWarpSize;
  int exclusive = 0;
  for (long long window_end = tile;; window_end -= kWarpSize) {
    const long long pred = window_end - kWarpSize + lane;
    // Tiles before 0 count as "prefix 0", so every window ends the search at tile 0 at the latest.
    StatusWord word = pred >= 0 ? load_status(status, pred) : make_status(kStatusPrefix, 0);
    while (__any_sync(kFullMask, status_flag(word) == kStatusEmpty)) {  // wait for the whole window
      __nanosleep(kPollDelayNs);
      if (status_flag(word) == kStatusEmpty) word = load_status(status, pred);
    }
    int value = status_value(word);
    const unsigned prefix_lanes = __ballot_sync(kFullMask, status_flag(word) == kStatusPrefix);
    if (prefix_lanes != 0) {
      // The nearest tile with a known prefix already counts every tile before it.
      const int nearest = kWarpSize - 1 - __clz(prefix_lanes);
      if (lane < nearest) value = 0;
      return exclusive + __reduce_add_sync(kFullMask, value);
    }
    exclusive += __reduce_add_sync(kFullMask, value);  // 32 aggregates; keep looking further back
  }
}

template <bool kInclusive, int kThreads, int kVecs>
__global__ void __launch_bounds__(kThreads, kLookBackMinBlocksPerSm)
    decoupled_scan_kernel(const int* __restrict__ in, int* __restrict__ out, std::size_t n,
                          StatusWord* status, unsigned* tile_counter) {
  constexpr int kWarps = kThreads / kWarpSize;
  constexpr int kTile = kThreads * kVecs * 4;
  static_assert(kWarps <= kWarpSize, "warp 0 scans the warp totals");
  __shared__ unsigned s_tile;
  __shared__ int s_warp_offsets[kWarps];
  __shared__ int s_tile_prefix;
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;

  // Tiles are numbered in the order blocks start, not by blockIdx: a block then waits only for tiles
  // of blocks that are already running, never for a block still waiting for a free SM (deadlock).
  if (threadIdx.x == 0) s_tile = atomicAdd(tile_counter, 1u);
  __syncthreads();  // every thread needs the tile number
  const unsigned tile = s_tile;

  const std::size_t chunk_begin = static_cast<std::size_t>(tile) * kTile +
                                  static_cast<std::size_t>(warp) * kVecs * kChunkItemsPerVec;
  int4 v[kVecs];
  load_chunk(in, chunk_begin, n, v);
  const int chunk_total = scan_chunk<kInclusive>(v);
  if (lane == 0) s_warp_offsets[warp] = chunk_total;
  __syncthreads();  // every warp's total is written before warp 0 reads them

  if (warp == 0) {
    const int total = lane < kWarps ? s_warp_offsets[lane] : 0;
    const int inclusive = warp_inclusive_scan(total);
    if (lane < kWarps) s_warp_offsets[lane] = inclusive - total;
    const int aggregate = __shfl_sync(kFullMask, inclusive, kWarpSize - 1);
    int tile_prefix = 0;
    if (tile == 0) {
      if (lane == 0) store_status(status, 0, kStatusPrefix, aggregate);
    } else {
      if (lane == 0) store_status(status, tile, kStatusAggregate, aggregate);  // successors may use it now
      __nanosleep(kLookBackDelayNs);  // give the predecessors time to publish (see kLookBackDelayNs)
      tile_prefix = look_back(status, tile);
      if (lane == 0) store_status(status, tile, kStatusPrefix, tile_prefix + aggregate);
    }
    if (lane == 0) s_tile_prefix = tile_prefix;
  }
  __syncthreads();  // the tile prefix and the warp offsets are written before anyone adds them

  add_to_chunk(v, s_tile_prefix + s_warp_offsets[warp]);
  store_chunk(out, chunk_begin, n, v);
}

// The scratch: the tile counter, then one status word per tile, starting kStatusOffset bytes in.
constexpr std::size_t kStatusOffset = 128;

template <int kThreads, int kVecs>
std::size_t decoupled_temp_bytes(std::size_t n) {
  const std::size_t tiles = cudalab::ceil_div<std::size_t>(n, static_cast<std::size_t>(kThreads) * kVecs * 4);
  return kStatusOffset + tiles * sizeof(StatusWord);
}

template <bool kInclusive, int kThreads, int kVecs>
void scan_decoupled(const int* d_in, int* d_out, std::size_t n, void* d_temp) {
  if (n == 0) return;
  const std::size_t tiles = cudalab::ceil_div<std::size_t>(n, static_cast<std::size_t>(kThreads) * kVecs * 4);
  auto* d_bytes = static_cast<unsigned char*>(d_temp);
  auto* d_tile_counter = reinterpret_cast<unsigned*>(d_bytes);
  auto* d_status = reinterpret_cast<StatusWord*>(d_bytes + kStatusOffset);
  // Every call starts from empty statuses and tile number 0. The memset runs on the same stream as
  // the kernel, so it is complete before the kernel starts.
  CUDA_CHECK(cudaMemsetAsync(d_temp, 0, decoupled_temp_bytes<kThreads, kVecs>(n)));
  decoupled_scan_kernel<kInclusive, kThreads, kVecs>
      <<<static_cast<unsigned>(tiles), kThreads>>>(d_in, d_out, n, d_status, d_tile_counter);
  CUDA_CHECK_LAST();
}

// END SOLUTION

std::size_t scan_decoupled_temp_bytes(std::size_t n) {
  // TODO(student): the bytes your single-pass scan needs for n items (about 1 line).
  // BEGIN SOLUTION
  return decoupled_temp_bytes<kLookBackThreads, kLookBackVecs>(n);
  // END SOLUTION
  // STUB: return 0;
}

void exclusive_scan_decoupled(const int* d_in, int* d_out, std::size_t n, void* d_temp) {
  // TODO(student): your single-pass exclusive scan (about 1 line).
  // BEGIN SOLUTION
  scan_decoupled<false, kLookBackThreads, kLookBackVecs>(d_in, d_out, n, d_temp);
  // END SOLUTION
}

void inclusive_scan_decoupled(const int* d_in, int* d_out, std::size_t n, void* d_temp) {
  // TODO(student): your single-pass inclusive scan (about 1 line).
  // BEGIN SOLUTION
  scan_decoupled<true, kLookBackThreads, kLookBackVecs>(d_in, d_out, n, d_temp);
  // END SOLUTION
}
