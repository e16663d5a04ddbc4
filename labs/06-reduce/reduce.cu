// Lab 06: sum reduction, from a divergent shared-memory tree to a single-pass kernel at memory speed.
//
// Every kernel is a template over the value type T (float or int), so one kernel serves both types
// the tests use. The two small overloads per step at the end of each section are given.
#include "reduce.cuh"

#include <cuda_runtime.h>

#include <algorithm>

#include <cudalab/check.cuh>
#include <cudalab/launch.cuh>

constexpr int kBlock = 256;                    // threads per block in every kernel of this lab
constexpr int kWarp = 32;                      // threads per warp on every NVIDIA GPU so far
constexpr int kWarpsPerBlock = kBlock / kWarp;
[[maybe_unused]] constexpr unsigned kFullMask = 0xffffffffu;  // all 32 lanes take part in a *_sync call
static_assert(kWarpsPerBlock <= kWarp, "block_reduce_sum: one warp must hold one sum per warp");

// ---------------------------------------------------------------------------------------------
// Given: the multi-pass driver for steps 1-4. A block-level kernel turns `count` values into one
// partial sum per block; the driver runs it again on the partials until one block is enough, and
// that last pass writes straight into d_out. Passes alternate between two regions of the workspace
// (a pass never writes the buffer it reads). Kernels of one stream run in order, so no pass starts
// before the previous one has finished: that is the grid-wide barrier between passes.
// ---------------------------------------------------------------------------------------------

template <class T>
using BlockKernel = void (*)(const T* in, T* out, std::size_t count);

template <class T>
void reduce_in_passes(BlockKernel<T> kernel, std::size_t items_per_block, const T* d_in, T* d_out,
                      std::size_t n, ReduceWorkspace& ws) {
  T* d_buffers[2] = {ws.partials<T>(), ws.partials<T>() + cudalab::ceil_div(n, items_per_block)};
  const T* d_src = d_in;
  std::size_t count = n;
  for (int pass = 0;; ++pass) {
    const std::size_t blocks = cudalab::ceil_div(count, items_per_block);
    T* d_dst = blocks == 1 ? d_out : d_buffers[pass % 2];
    kernel<<<static_cast<unsigned>(blocks), kBlock>>>(d_src, d_dst, count);
    CUDA_CHECK_LAST();
    if (blocks == 1) return;
    d_src = d_dst;
    count = blocks;
  }
}

// ---------------------------------------------------------------------------------------------
// Step 1: interleaved addressing. Each thread loads one value into shared memory; at step s the
// threads whose index is a multiple of 2s add the value s places to their right. Correct, but the
// active threads are scattered over every warp, so most warps diverge at every step.
// ---------------------------------------------------------------------------------------------

template <class T>
__global__ void reduce_interleaved_kernel(const T* in, T* out, std::size_t count) {
  // TODO(student): sum this block's kBlock values in a __shared__ T s_data[kBlock]: each thread stores
  //                its value there (a thread past count stores one that adds nothing), then a tree of
  //                log2(kBlock) steps folds the slots pairwise, the adding threads picked by interleaved
  //                addressing (the chapter's step 1). Thread 0 writes the block's sum to out[blockIdx.x].
  //                Every step reads slots other threads wrote: where do barriers go, and does every
  //                thread reach them? Keep the global index in std::size_t (about 10 lines).
}

template <class T>
void reduce_interleaved_impl(const T* d_in, T* d_out, std::size_t n, ReduceWorkspace& ws) {
  reduce_in_passes<T>(reduce_interleaved_kernel<T>, kBlock, d_in, d_out, n, ws);
}

void reduce_interleaved(const float* d_in, float* d_out, std::size_t n, ReduceWorkspace& ws) {
  reduce_interleaved_impl(d_in, d_out, n, ws);
}
void reduce_interleaved(const int* d_in, int* d_out, std::size_t n, ReduceWorkspace& ws) {
  reduce_interleaved_impl(d_in, d_out, n, ws);
}

// ---------------------------------------------------------------------------------------------
// Step 2: sequential addressing. At each step the first half of the active threads adds the second
// half: threads 0..stride-1 work and the rest idle, so whole warps either work or retire, and no warp
// diverges until the stride drops below 32.
// ---------------------------------------------------------------------------------------------

template <class T>
__global__ void reduce_sequential_kernel(const T* in, T* out, std::size_t count) {
  // TODO(student): the load and the tree of step 1, but pick the adding threads so that they stay
  //                packed at the front of the block: whole warps then work or idle together. Barriers
  //                as before, outside the if that picks the threads (about 10 lines).
}

template <class T>
void reduce_sequential_impl(const T* d_in, T* d_out, std::size_t n, ReduceWorkspace& ws) {
  reduce_in_passes<T>(reduce_sequential_kernel<T>, kBlock, d_in, d_out, n, ws);
}

void reduce_sequential(const float* d_in, float* d_out, std::size_t n, ReduceWorkspace& ws) {
  reduce_sequential_impl(d_in, d_out, n, ws);
}
void reduce_sequential(const int* d_in, int* d_out, std::size_t n, ReduceWorkspace& ws) {
  reduce_sequential_impl(d_in, d_out, n, ws);
}

// ---------------------------------------------------------------------------------------------
// Step 3: first add during load. In step 2 half the threads idle from the first step on. Here each
// thread adds two values, kBlock apart (so both loads stay coalesced), before the tree: a block
// covers 2 * kBlock values and the grid needs half as many blocks.
// ---------------------------------------------------------------------------------------------

template <class T>
__global__ void reduce_first_add_kernel(const T* in, T* out, std::size_t count) {
  // TODO(student): a block now covers 2 * kBlock values: each thread adds two of them as it loads
  //                (chosen so that both loads of a warp stay coalesced), stores the sum, then runs the
  //                tree of step 2. Mind where each block starts now, and that each of the two values
  //                may lie past count on its own (about 12 lines).
}

template <class T>
void reduce_first_add_impl(const T* d_in, T* d_out, std::size_t n, ReduceWorkspace& ws) {
  // TODO(student): run reduce_first_add_kernel<T> with reduce_in_passes: how many values does one
  //                block cover now? (1 line)
}

void reduce_first_add(const float* d_in, float* d_out, std::size_t n, ReduceWorkspace& ws) {
  reduce_first_add_impl(d_in, d_out, n, ws);
}
void reduce_first_add(const int* d_in, int* d_out, std::size_t n, ReduceWorkspace& ws) {
  reduce_first_add_impl(d_in, d_out, n, ws);
}

// ---------------------------------------------------------------------------------------------
// Step 4: warp shuffles. __shfl_down_sync(mask, v, d) returns v from the lane d places higher, register
// to register, with no shared memory and no __syncthreads. Five shuffles sum a warp; lane 0 of each
// warp then leaves its sum in shared memory, and the first warp sums those. Since Volta the lanes of a
// warp are scheduled independently, so the old "warp-synchronous" shared-memory code with `volatile`
// and no barrier is a data race; the *_sync intrinsics name the lanes that must meet (the mask).
// ---------------------------------------------------------------------------------------------

// The sum of v over the 32 lanes of the calling warp, valid in lane 0. All 32 lanes must call it.
template <class T>
__device__ T warp_reduce_sum(T v) {
  // TODO(student): bring all 32 lanes' v together in lane 0 with log2(kWarp) __shfl_down_sync calls:
  //                which offsets? Every lane makes every call, with kFullMask (about 3 lines).
  return v;
}

// The sum of v over the whole block (kBlock threads), valid in thread 0. Every thread must call it.
// It uses shared memory: a caller that calls it twice needs a __syncthreads() in between.
template <class T>
__device__ T block_reduce_sum(T v) {
  // TODO(student): two levels: each warp sums itself with warp_reduce_sum, the warp sums meet in a
  //                __shared__ T s_warp_sums[kWarpsPerBlock], and warp 0 sums those. Warp 0 may read
  //                them only once every warp has stored (a barrier that every thread reaches), and its
  //                lanes with no warp sum to read add 0, not a slot past the array (about 8 lines).
  return v;
}

template <class T>
__global__ void reduce_shuffle_kernel(const T* in, T* out, std::size_t count) {
  // TODO(student): load two values per thread as in step 3, reduce them with block_reduce_sum, and
  //                let thread 0 write the block's sum (about 6 lines).
}

template <class T>
void reduce_shuffle_impl(const T* d_in, T* d_out, std::size_t n, ReduceWorkspace& ws) {
  // TODO(student): run reduce_shuffle_kernel<T> with reduce_in_passes (1 line).
}

void reduce_shuffle(const float* d_in, float* d_out, std::size_t n, ReduceWorkspace& ws) {
  reduce_shuffle_impl(d_in, d_out, n, ws);
}
void reduce_shuffle(const int* d_in, int* d_out, std::size_t n, ReduceWorkspace& ws) {
  reduce_shuffle_impl(d_in, d_out, n, ws);
}

// ---------------------------------------------------------------------------------------------
// Step 5: one kernel for the whole array. The grid has only as many blocks as fit on the GPU at once
// (occupancy x SMs); each thread strides over the array with 16-byte loads (float4/int4), kUnroll of
// them in flight at a time, so the memory system always has work. Each block writes its partial sum;
// then thread 0 publishes it (__threadfence) and takes a ticket from an atomic counter. The block that
// draws the last ticket knows every other partial is visible: it adds them, writes *out, and resets
// the counter to zero for the next call.
// ---------------------------------------------------------------------------------------------

[[maybe_unused]] constexpr int kUnroll = 4;  // 16-byte loads each thread issues before it adds any of them

// Given: the 16-byte vector type of each value type.
template <class T>
struct Vec4;
template <>
struct Vec4<float> {
  using type = float4;
};
template <>
struct Vec4<int> {
  using type = int4;
};

template <class T>
__global__ void __launch_bounds__(kBlock)
    reduce_single_pass_kernel(const T* __restrict__ in, T* out, std::size_t n, T* partials,
                              unsigned int* counter) {
  // TODO(student): (about 40 lines)
  //   1. Each thread sums its share with a grid-stride loop over the array's 16-byte vectors
  //      (reinterpret_cast to Vec4<T>::type), kUnroll loads issued before any add, then a plain loop for
  //      what is left. Every load of an unrolled round must be in bounds, not only its first; the n % 4
  //      values after the last whole vector count too; indices and strides are std::size_t.
  //   2. block_reduce_sum, then thread 0 stores the block's partial in partials[blockIdx.x] and takes a
  //      ticket from counter with an atomic, so that exactly one block learns every partial is in (what
  //      does the atomic return?). The partial must be visible to the whole device before the ticket
  //      is (the chapter's fence). Thread 0 tells its block in a __shared__ flag: read it after a barrier.
  //   3. That block adds every partial (read them with __ldcg: from L2, not a stale L1), thread 0 writes
  //      *out, and counter must be ready for the next call.
}

template <class T>
void reduce_single_pass_impl(const T* d_in, T* d_out, std::size_t n, ReduceWorkspace& ws) {
  // TODO(student): grid = min(blocks that fit on the GPU at once, blocks the data needs): ask
  //                cudaOccupancyMaxActiveBlocksPerMultiprocessor for reduce_single_pass_kernel<T>
  //                (kBlock threads, no dynamic shared memory) and multiply by cudalab::sm_count().
  //                The answer does not change between calls: compute it once (a static local).
  //                Then launch with ws.partials<T>() and ws.counter(), and check (about 12 lines).
}

void reduce_single_pass(const float* d_in, float* d_out, std::size_t n, ReduceWorkspace& ws) {
  reduce_single_pass_impl(d_in, d_out, n, ws);
}
void reduce_single_pass(const int* d_in, int* d_out, std::size_t n, ReduceWorkspace& ws) {
  reduce_single_pass_impl(d_in, d_out, n, ws);
}
