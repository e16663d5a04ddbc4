// Lab 11: quicksort with dynamic parallelism (CDP2, the only device-launch model on Hopper).
//
// The shape of the sort, top to bottom:
//   host        quicksort() sizes the pending-launch limit, allocates the workspace, launches the root
//   root        schedules the whole input, then tail-launches sort_leaves_kernel
//   partition   one grid per segment larger than kBlockSortMax: every block partitions a tile; the last
//               block to finish fills the run of pivot-equal keys and schedules the two sides, each of
//               which becomes another partition grid (launched into cudaStreamFireAndForget) or a leaf
//   leaves      small segments are only recorded; the tail-launched grid sorts them all in shared
//               memory once the whole tree of partitions has finished
// Keys move between three buffers: the input (read only), a scratch buffer and the output. A partition
// reads one and writes the other of scratch/output, so no partition ever reads what it overwrites.
// Reference solution. Regions between BEGIN/END SOLUTION are removed from the student's copy, and
// "STUB:" lines become code there (python3 -m grader skeleton --write).
#include "quicksort.cuh"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>

#include <cudalab/check.cuh>
#include <cudalab/device_buffer.cuh>
#include <cudalab/launch.cuh>

constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kWarp = 32;
constexpr int kSortBlock = 1024;                     // threads of a block sort: 4 comparators each per step
constexpr int kPartBlock = 256;                      // threads of a partition block
constexpr int kPartItems = 8;                        // keys per partition thread
constexpr int kPartTile = kPartBlock * kPartItems;   // keys per partition block (2048)
constexpr int kPartWarps = kPartBlock / kWarp;
constexpr int kFillInline = 16 * kPartBlock;         // pivot runs up to this long are filled by the last block
constexpr int kFillTile = 16 * kPartBlock;           // keys per block of fill_kernel
constexpr int kNodesPerBlockSortMax = 8;             // launch budget: grids per kBlockSortMax input keys
constexpr int kSpareLaunches = 64;                   // budget on top of that (small inputs, the tail launch)

// ---------------------------------------------------------------------------------------------
// Task 1: the block sort. Segments of at most kBlockSortMax keys fit in shared memory, where one
// block sorts them with a bitonic network: O(m log^2 m) work, but every step is a parallel pass
// over shared memory, which beats recursing further with more launches.
// ---------------------------------------------------------------------------------------------

// Slots in the bitonic network for m keys: the next power of two.
__device__ __forceinline__ int next_pow2(int m) { return m <= 1 ? 1 : 1 << (32 - __clz(m - 1)); }

// Sorts keys[0, m) ascending with one block of kSortBlock threads, in place (shared or global memory).
// Every comparator puts the smaller key at the lower index. The network has P = next_pow2(m) slots; the
// slots [m, P) do not exist and act as +infinity, so a comparator that touches one would never swap and
// is skipped. Ends with __syncthreads(), so the caller may read the result right away.
__device__ __forceinline__ void bitonic_sort_block(unsigned* keys, int m) {
  // TODO(student): the bitonic network (about 14 lines). Each stage merges sorted runs into runs twice
  //                as long, in passes of shrinking comparator distance; the first pass of a stage pairs
  //                each slot with its mirror image in the run (the README's figure and Task 1 hint show
  //                how to turn a comparator number into its two slots). Pitfalls: the stages go up to the
  //                padded size P, not m; a pass has P/2 comparators, more than kSortBlock threads for
  //                large m; a comparator that reaches a missing slot (m or past it) is skipped, as that
  //                slot holds no key; and every thread must reach a __syncthreads() between passes.
  // BEGIN SOLUTION
  const int slots = next_pow2(m);
  for (int k = 2; k <= slots; k <<= 1) {      // merge sorted runs of k/2 keys into runs of k
    for (int j = k >> 1; j > 0; j >>= 1) {    // comparator distance within the merge
      for (int i = threadIdx.x; i < slots / 2; i += kSortBlock) {
        const int lo = ((i & ~(j - 1)) << 1) | (i & (j - 1));   // index i with a 0 bit inserted at j
        const int hi = (j == k >> 1) ? lo ^ (k - 1) : lo ^ j;
        if (hi < m) {                         // hi >= m is a missing slot, +infinity: no swap
          const unsigned a = keys[lo];
          const unsigned b = keys[hi];
          if (a > b) {
            keys[lo] = b;
            keys[hi] = a;
          }
        }
      }
      __syncthreads();  // the next step reads keys this step's other threads wrote
    }
  }
  // END SOLUTION
}

// One block copies in[0, m) into shared memory, sorts it there and writes it to out[0, m).
// m <= kBlockSortMax; in and out may be the same array (every key is loaded before any is stored).
__device__ __forceinline__ void sort_small_segment(const unsigned* in, unsigned* out, int m, unsigned* s_keys) {
  // TODO(student): load, sort with bitonic_sort_block, store; mind the barrier between the load and
  //                the network (about 5 lines).
  // BEGIN SOLUTION
  for (int i = threadIdx.x; i < m; i += kSortBlock) s_keys[i] = in[i];
  __syncthreads();  // the network compares keys that other threads loaded
  bitonic_sort_block(s_keys, m);
  for (int i = threadIdx.x; i < m; i += kSortBlock) out[i] = s_keys[i];
  // END SOLUTION
}

__global__ void __launch_bounds__(kSortBlock) block_sort_kernel(const unsigned* in, unsigned* out, int n) {
  __shared__ unsigned s_keys[kBlockSortMax];
  sort_small_segment(in, out, n, s_keys);
}

void block_sort(const unsigned* d_in, unsigned* d_out, int n) {
  if (n < 0 || n > kBlockSortMax) {
    throw std::invalid_argument("block_sort: n = " + std::to_string(n) + " is outside 0.." +
                                std::to_string(kBlockSortMax));
  }
  if (n == 0) return;  // a grid of zero blocks is an invalid launch
  block_sort_kernel<<<1, kSortBlock>>>(d_in, d_out, n);
  CUDA_CHECK_LAST();
}

// ---------------------------------------------------------------------------------------------
// Task 2: the three-way partition. Every block handles one tile of kPartTile keys: it counts its keys
// below and above the pivot, reserves that many slots at the front and at the back of the output with
// one atomicAdd per side, and writes its keys there through shared memory, so the stores coalesce.
// ---------------------------------------------------------------------------------------------

// Running totals of one partition grid, zeroed before it starts.
struct NodeCounters {
  int less;              // keys < pivot placed so far (slots taken at the front)
  int greater;           // keys > pivot placed so far (slots taken at the back)
  unsigned blocks_done;  // blocks that have finished: the one that makes it gridDim.x is the last
};

// Exclusive prefix sum of value over the kPartBlock threads of the block (warp shuffles, then the
// eight warp totals); *total receives the sum over the block. Call it once per kernel: s_warp is not
// guarded for reuse.
__device__ __forceinline__ int block_exclusive_sum(int value, int* total) {
  __shared__ int s_warp[kPartWarps];
  const int lane = threadIdx.x % kWarp;
  const int warp = threadIdx.x / kWarp;
  int inclusive = value;
#pragma unroll
  for (int d = 1; d < kWarp; d <<= 1) {
    const int up = __shfl_up_sync(kFullMask, inclusive, d);
    if (lane >= d) inclusive += up;
  }
  if (lane == kWarp - 1) s_warp[warp] = inclusive;
  __syncthreads();  // every warp's total is in shared memory
  int before = 0, sum = 0;
#pragma unroll
  for (int w = 0; w < kPartWarps; ++w) {
    before += w < warp ? s_warp[w] : 0;
    sum += s_warp[w];
  }
  *total = sum;
  return before + inclusive - value;
}

// Block blockIdx.x partitions keys [blockIdx.x * kPartTile, +kPartTile) of in[0, count) into out:
// keys < pivot to slots taken from the front of out, keys > pivot to slots taken from the back, keys
// equal to the pivot nowhere. counters->less and counters->greater hand out the slots.
__device__ void partition_tile(const unsigned* in, unsigned* out, int count, unsigned pivot,
                               NodeCounters* counters) {
  // TODO(student): the block's part of the partition (about 32 lines). The block owns one tile of
  //   kPartTile keys, kPartItems per thread:
  //   1. load them so that a warp reads consecutive keys (coalesced), each key of the tile exactly once;
  //      a thread past count needs a stand-in key that lands on neither side;
  //   2. count each thread's keys < pivot and > pivot; block_exclusive_sum (once per kernel) gives each
  //      thread the count of the threads before it and the block's totals. Both counts can share one
  //      int if each field is wide enough for a whole tile;
  //   3. thread 0 reserves the block's slots with one atomicAdd per side on *counters: the < side
  //      fills out from the front, the > side from the back (so mind where the block's greater keys
  //      begin: its reserved range ends at the slots other blocks took before it);
  //   4. stage the < keys, then the > keys, in __shared__ unsigned s_keys[kPartTile]; every thread must
  //      see the staged keys and thread 0's bases before any thread copies them out, with consecutive
  //      threads writing consecutive slots.
  // BEGIN SOLUTION
  __shared__ unsigned s_keys[kPartTile];
  __shared__ int s_base_less, s_base_greater;  // where this block's keys go (from thread 0's atomics)
  const int tile_begin = blockIdx.x * kPartTile;
  unsigned keys[kPartItems];
  int n_less = 0, n_greater = 0;
#pragma unroll
  for (int k = 0; k < kPartItems; ++k) {
    const int i = tile_begin + k * kPartBlock + threadIdx.x;  // coalesced: a warp reads 128 bytes
    keys[k] = i < count ? in[i] : pivot;                      // past the end: equal to the pivot, dropped
    n_less += keys[k] < pivot;
    n_greater += keys[k] > pivot;
  }
  // One scan for both counts: a tile holds at most 2048 keys, so the low 16 bits never carry.
  int packed_total = 0;
  const int packed_before = block_exclusive_sum(n_less | (n_greater << 16), &packed_total);
  const int total_less = packed_total & 0xffff;
  const int total_greater = packed_total >> 16;
  if (threadIdx.x == 0) {
    s_base_less = atomicAdd(&counters->less, total_less);
    s_base_greater = atomicAdd(&counters->greater, total_greater);
  }
  int at_less = packed_before & 0xffff;                    // staging: less keys first...
  int at_greater = total_less + (packed_before >> 16);     // ...then the greater keys
#pragma unroll
  for (int k = 0; k < kPartItems; ++k) {
    if (keys[k] < pivot) {
      s_keys[at_less++] = keys[k];
    } else if (keys[k] > pivot) {
      s_keys[at_greater++] = keys[k];
    }
  }
  __syncthreads();  // the staged keys and the two reserved bases are complete
  const int greater_begin = count - s_base_greater - total_greater;  // this block's slots at the back
  for (int i = threadIdx.x; i < total_less + total_greater; i += kPartBlock) {
    out[i < total_less ? s_base_less + i : greater_begin + (i - total_less)] = s_keys[i];
  }
  // END SOLUTION
}

__global__ void __launch_bounds__(kPartBlock)
    partition_kernel(const unsigned* in, unsigned* out, int count, unsigned pivot, NodeCounters* counters) {
  partition_tile(in, out, count, pivot, counters);
}

Split partition_three_way(const unsigned* d_in, unsigned* d_out, int n, unsigned pivot) {
  if (n < 0) throw std::invalid_argument("partition_three_way: n = " + std::to_string(n) + " < 0");
  if (n == 0) return {0, 0};
  cudalab::DeviceBuffer<NodeCounters> d_counters(1);
  d_counters.fill_bytes(0);
  partition_kernel<<<cudalab::ceil_div(n, kPartTile), kPartBlock>>>(d_in, d_out, n, pivot, d_counters.data());
  CUDA_CHECK_LAST();
  const NodeCounters h_counters = d_counters.to_host()[0];  // cudaMemcpy waits for the kernel
  return {h_counters.less, h_counters.greater};
}

// ---------------------------------------------------------------------------------------------
// Tasks 3 and 4: the quicksort tree. Device-side launches in CDP2 go into two named streams:
//   cudaStreamFireAndForget  the child runs on its own; the parent neither waits for it nor can
//   cudaStreamTailLaunch     the child starts after the parent grid AND all the work it launched
//                            (recursively) has finished: the CDP2 way to act on the children's results
// There is no device-side cudaDeviceSynchronize() any more, so no kernel ever waits for a child.
// ---------------------------------------------------------------------------------------------

enum Buffer : int { kInput = 0, kScratch = 1, kOutput = 2 };

// The buffer a partition of `from` writes into: scratch and output alternate; the input is never written.
__host__ __device__ constexpr int partition_target(int from) { return from == kScratch ? kOutput : kScratch; }

struct Control {  // zeroed before the root starts
  int nodes;      // grids launched so far (partitions and fills), against the budget max_nodes
  int leaves;     // leaf jobs recorded so far
  int error;      // the first failure seen on the device (a cudaError_t); 0 = none
};

struct LeafJob {  // keys [begin, begin + count) of buffer `buffer`, to be sorted into the output
  int begin;
  int count;
  int buffer;
};

struct Segment {  // what one partition grid works on
  int begin;
  int count;
  int depth;      // 0 for the whole input
  int buffer;     // where its keys are now
  unsigned pivot;
  int node;       // its NodeCounters slot
};

struct Workspace {  // everything the device side needs, passed by value to every kernel
  const unsigned* in;
  unsigned* scratch;
  unsigned* out;
  NodeCounters* counters;  // max_nodes slots
  LeafJob* leaves;         // max_leaves slots
  Control* control;
  int max_nodes;
  int max_leaves;
  int max_depth;

  __device__ const unsigned* keys(int buffer) const {
    return buffer == kInput ? in : buffer == kScratch ? scratch : out;
  }
  __device__ unsigned* writable(int buffer) const { return buffer == kScratch ? scratch : out; }
};

// Keeps the first failure: later ones are usually its consequences.
__device__ void record_error(const Workspace& ws, cudaError_t error) {
  atomicCAS(&ws.control->error, 0, static_cast<int>(error));
}

// Task 4: call right after every device-side launch, by the thread that launched.
__device__ void check_launch(const Workspace& ws) {
  // TODO(student): a device-side launch reports failure (a full pending-launch pool, too deep a
  //                nesting) only through cudaGetLastError() in the launching thread. Record any error
  //                with record_error, so the host can report it (about 3 lines).
  // BEGIN SOLUTION
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) record_error(ws, error);
  // END SOLUTION
}

// Records a small (or depth-limited) segment for the tail-launched leaf sort.
__device__ void push_leaf(const Workspace& ws, LeafJob job) {
  const int slot = atomicAdd(&ws.control->leaves, 1);
  if (slot >= ws.max_leaves) {
    record_error(ws, cudaErrorMemoryAllocation);  // the host sized the list too small: a bug, say so
    return;
  }
  ws.leaves[slot] = job;
}

// A launch slot from the budget the host sized the pending-launch limit for; -1 (and an error) if none.
__device__ int take_node(const Workspace& ws) {
  const int node = atomicAdd(&ws.control->nodes, 1);
  if (node >= ws.max_nodes) {
    record_error(ws, cudaErrorLaunchPendingCountExceeded);
    return -1;
  }
  return node;
}

// The pivot of keys[0, count), computed by a whole warp: the median of 32 evenly spaced samples.
// Sorted and reversed inputs get their exact median; random ones a split close to 50/50, which keeps
// the tree about log2(n / kBlockSortMax) levels deep. __ldcg reads from L2, where the partition blocks
// that just wrote these keys left them (this SM's L1 may hold older copies of those addresses).
__device__ unsigned warp_median_pivot(const unsigned* keys, int count) {
  const int lane = threadIdx.x % kWarp;
  const long long at = static_cast<long long>(count) * lane / kWarp + count / (2 * kWarp);
  const unsigned mine = __ldcg(keys + at);
  int rank = 0;  // position of this lane's sample in sorted order; ties broken by lane
  for (int other = 0; other < kWarp; ++other) {
    const unsigned theirs = __shfl_sync(kFullMask, mine, other);
    rank += theirs < mine || (theirs == mine && other < lane);
  }
  const unsigned median_lane = __ffs(__ballot_sync(kFullMask, rank == kWarp / 2)) - 1;
  return __shfl_sync(kFullMask, mine, median_lane);
}

// Sets out[0, count) to value: the run of pivot-equal keys, when it is too long for one block.
__global__ void __launch_bounds__(kPartBlock) fill_kernel(unsigned* out, int count, unsigned value) {
  for (int i = blockIdx.x * kPartBlock + threadIdx.x; i < count; i += gridDim.x * kPartBlock) out[i] = value;
}

__global__ void quicksort_partition_kernel(Workspace ws, Segment seg);  // defined below; launches itself

// Decides what happens to keys [begin, begin + count) of `buffer`, at recursion depth `depth`: nothing
// (empty), a leaf job (small enough for the block sort, or too deep), or a partition grid launched
// into cudaStreamFireAndForget. Called by all 32 threads of one warp with the same arguments.
__device__ void schedule_segment(const Workspace& ws, int begin, int count, int depth, int buffer) {
  // TODO(student): Task 3, with the depth limit of Task 4 (about 14 lines). Decide the segment's fate:
  //   - an empty one needs nothing;
  //   - one the block sort can take (at most kBlockSortMax keys), or one at ws.max_depth (Task 4),
  //     becomes a leaf job (push_leaf). A single key too: it may still lie in the input or scratch;
  //   - any other one gets a pivot from warp_median_pivot (every lane must call it) and a partition
  //     grid: take_node (give up on -1), then launch quicksort_partition_kernel into
  //     cudaStreamFireAndForget, kPartBlock threads a block and enough blocks (kPartTile keys each)
  //     for every key, and check_launch.
  //   Pitfall: all 32 lanes run this function, but a segment must be recorded or launched only once.
  // BEGIN SOLUTION
  const int lane = threadIdx.x % kWarp;
  if (count == 0) return;
  if (count <= kBlockSortMax || depth >= ws.max_depth) {  // past max_depth: the fallback sort takes it
    if (lane == 0) push_leaf(ws, LeafJob{begin, count, buffer});
    return;
  }
  const unsigned pivot = warp_median_pivot(ws.keys(buffer) + begin, count);
  if (lane == 0) {
    const int node = take_node(ws);
    if (node < 0) return;
    const Segment seg{begin, count, depth, buffer, pivot, node};
    quicksort_partition_kernel<<<cudalab::ceil_div(count, kPartTile), kPartBlock, 0, cudaStreamFireAndForget>>>(
        ws, seg);
    check_launch(ws);
  }
  // END SOLUTION
}

// One node of the tree. Every block partitions its tile from seg.buffer into the other buffer; the last
// block to finish then knows the split, fills the pivot-equal run of the output, and schedules both
// sides one level deeper: warp 0 the keys < pivot, warp 1 the keys > pivot.
__global__ void __launch_bounds__(kPartBlock) quicksort_partition_kernel(Workspace ws, Segment seg) {
  const int target = partition_target(seg.buffer);
  NodeCounters* counters = ws.counters + seg.node;
  partition_tile(ws.keys(seg.buffer) + seg.begin, ws.writable(target) + seg.begin, seg.count, seg.pivot, counters);

  // TODO(student): Task 3 (about 25 lines), once the block has partitioned its tile:
  //   1. find the block that finishes last, with counters->blocks_done (one atomicAdd per block, its
  //      answer shared through shared memory); the other blocks return. A block's stores must be
  //      visible device-wide before it counts itself done (a fence), and every thread of the block
  //      must reach each __syncthreads();
  //   2. the last block reads the final counts after another fence, from L2 (__ldcg): this SM's L1
  //      may hold stale copies;
  //   3. the pivot-equal keys are final once the counts are known: write seg.pivot over their run in
  //      the output buffer ws.out; this block's threads do it for up to kFillInline keys, a fill_kernel
  //      grid (take_node, cudaStreamFireAndForget, check_launch) for more;
  //   4. schedule the < side and the > side of the segment, one warp each, one level deeper, in the
  //      buffer the partition wrote (`target`).
  // BEGIN SOLUTION
  __shared__ bool s_is_last;
  __threadfence();  // this thread's output stores reach device scope before the block reports done
  __syncthreads();
  if (threadIdx.x == 0) s_is_last = atomicAdd(&counters->blocks_done, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!s_is_last) return;  // uniform: the whole block leaves

  __threadfence();  // acquire side: every other block's stores and counts are visible from here on
  const int less = __ldcg(&counters->less);
  const int greater = __ldcg(&counters->greater);
  const int equal = seg.count - less - greater;
  unsigned* equal_run = ws.out + seg.begin + less;  // already final: every key there is the pivot
  if (equal <= kFillInline) {
    for (int i = threadIdx.x; i < equal; i += kPartBlock) equal_run[i] = seg.pivot;
  } else if (threadIdx.x == 0 && take_node(ws) >= 0) {
    fill_kernel<<<cudalab::ceil_div(equal, kFillTile), kPartBlock, 0, cudaStreamFireAndForget>>>(equal_run, equal,
                                                                                                  seg.pivot);
    check_launch(ws);
  }

  const int warp = threadIdx.x / kWarp;
  if (warp == 0) {
    schedule_segment(ws, seg.begin, less, seg.depth + 1, target);
  } else if (warp == 1) {
    schedule_segment(ws, seg.begin + seg.count - greater, greater, seg.depth + 1, target);
  }
  // END SOLUTION
}

// Sorts every recorded leaf into the output. Tail-launched by the root, so it starts only when the
// whole partition tree (every grid launched from the root, recursively) has finished and the leaf
// list is complete. Block b takes leaves b, b + gridDim.x, ...
__global__ void __launch_bounds__(kSortBlock) sort_leaves_kernel(Workspace ws) {
  __shared__ unsigned s_keys[kBlockSortMax];
  const int leaves = min(ws.control->leaves, ws.max_leaves);
  for (int j = blockIdx.x; j < leaves; j += gridDim.x) {
    const LeafJob job = ws.leaves[j];
    const unsigned* src = ws.keys(job.buffer) + job.begin;
    unsigned* dst = ws.out + job.begin;
    if (job.count <= kBlockSortMax) {
      // TODO(student): Task 3: sort the leaf with your Task 1 code (1 line).
      // BEGIN SOLUTION
      sort_small_segment(src, dst, job.count, s_keys);
      // END SOLUTION
    } else {
      // TODO(student): Task 4, the depth-limit fallback for a leaf too large for shared memory: sort it
      //                with bitonic_sort_block right in dst (global memory), after bringing its keys there
      //                if they lie in another buffer; no comparator may run before every thread's copy is
      //                done. Slow (one block), but it only runs past max_depth (about 5 lines).
      // BEGIN SOLUTION
      if (src != dst) {  // uniform across the block
        for (int i = threadIdx.x; i < job.count; i += kSortBlock) dst[i] = src[i];
        __syncthreads();  // the network reads keys that other threads copied
      }
      bitonic_sort_block(dst, job.count);
      // END SOLUTION
    }
    __syncthreads();  // the next leaf reuses s_keys
  }
}

// The host launches this with one warp: it schedules the whole input, then tail-launches the leaf sort.
__global__ void quicksort_root_kernel(Workspace ws, int n, int leaf_blocks) {
  // TODO(student): Task 3 (about 5 lines): the whole warp schedules the whole input (buffer kInput,
  //                depth 0); then one thread launches sort_leaves_kernel (leaf_blocks blocks of
  //                kSortBlock threads) so that it starts only after the entire tree has finished, and
  //                checks that launch.
  // BEGIN SOLUTION
  schedule_segment(ws, 0, n, 0, kInput);
  if (threadIdx.x == 0) {
    sort_leaves_kernel<<<leaf_blocks, kSortBlock, 0, cudaStreamTailLaunch>>>(ws);
    check_launch(ws);
  }
  // END SOLUTION
}

void quicksort(const unsigned* d_in, unsigned* d_out, int n, QuicksortOptions options) {
  if (n < 0 || options.max_depth < 0 || options.max_depth > kMaxDepthLimit || options.pending_launch_limit < 0) {
    throw std::invalid_argument("quicksort: n = " + std::to_string(n) + ", max_depth = " +
                                std::to_string(options.max_depth) + " (0.." + std::to_string(kMaxDepthLimit) +
                                "), pending_launch_limit = " + std::to_string(options.pending_launch_limit));
  }
  if (n == 0) return;

  // The launch budget: partition and fill grids. A tree of random keys needs about 1.5 grids per
  // kBlockSortMax keys; the budget is far above that, and the device refuses (and reports) any launch
  // beyond it rather than overrunning the pending-launch pool or the counters.
  const int max_nodes = kNodesPerBlockSortMax * cudalab::ceil_div(n, kBlockSortMax) + kSpareLaunches;
  const int max_leaves = 2 * max_nodes + 1;  // each partition yields at most two leaves; the root one

  // TODO(student): Task 4: the pending-launch limit (about 8 lines). A device-side launch stays
  //                "pending" until its grid completes, and in CDP2 a grid completes only after all of
  //                its children: every grid of a deep tree is pending at once. The default pool holds
  //                2048. Read the limit with cudaDeviceGetLimit(cudaLimitDevRuntimePendingLaunchCount);
  //                raise it to max_nodes + kSpareLaunches if it is lower; if
  //                options.pending_launch_limit > 0, set exactly that instead.
  // BEGIN SOLUTION
  std::size_t pending = 0;
  CUDA_CHECK(cudaDeviceGetLimit(&pending, cudaLimitDevRuntimePendingLaunchCount));
  const std::size_t wanted = options.pending_launch_limit > 0
                                 ? static_cast<std::size_t>(options.pending_launch_limit)
                                 : static_cast<std::size_t>(max_nodes) + kSpareLaunches;
  if (options.pending_launch_limit > 0 ? pending != wanted : pending < wanted) {
    CUDA_CHECK(cudaDeviceSetLimit(cudaLimitDevRuntimePendingLaunchCount, wanted));
  }
  // END SOLUTION

  cudalab::DeviceBuffer<unsigned> d_scratch(n);
  cudalab::DeviceBuffer<NodeCounters> d_counters(max_nodes);
  cudalab::DeviceBuffer<LeafJob> d_leaves(max_leaves);
  cudalab::DeviceBuffer<Control> d_control(1);
  d_counters.fill_bytes(0);
  d_control.fill_bytes(0);
  const Workspace ws{d_in,           d_scratch.data(), d_out,     d_counters.data(), d_leaves.data(),
                     d_control.data(), max_nodes,      max_leaves, options.max_depth};
  const int leaf_blocks = 2 * cudalab::sm_count();  // two blocks of 1024 threads fill an SM

  // TODO(student): Task 3: launch quicksort_root_kernel with one block of one warp, then
  //                CUDA_CHECK_LAST() (2 lines).
  // BEGIN SOLUTION
  quicksort_root_kernel<<<1, kWarp>>>(ws, n, leaf_blocks);
  CUDA_CHECK_LAST();
  // END SOLUTION

  // TODO(student): Task 4: copy the Control block back (cudaMemcpy waits for the root, and so for
  //                the whole tree and the tail launch) and, if its error is set, throw
  //                cudalab::CudaError(static_cast<cudaError_t>(error), "<what failed>", __FILE__, __LINE__)
  //                (about 6 lines).
  // BEGIN SOLUTION
  const Control h_control = d_control.to_host()[0];
  if (h_control.error != 0) {
    throw cudalab::CudaError(static_cast<cudaError_t>(h_control.error), "a device-side launch in quicksort",
                             __FILE__, __LINE__);
  }
  // END SOLUTION
  // STUB: CUDA_CHECK(cudaDeviceSynchronize());  // until Task 4 reads the Control block: wait for the tree
}
