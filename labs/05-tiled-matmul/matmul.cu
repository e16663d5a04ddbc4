// Lab 05: shared-memory tiling. A transpose warm-up (coalescing, bank conflicts), then matrix
// multiplication from one thread per output to tiles in shared memory, and a register-blocked challenge.
#include "matmul.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include <cudalab/check.cuh>
#include <cudalab/launch.cuh>

using cudalab::ceil_div;

// =============================================================================================
// Part A: transpose. Blocks of kTile x kRows threads own a kTile x kTile tile; each thread moves
// kTile / kRows elements, one per pass, so a block makes several independent loads at once.
// =============================================================================================

constexpr int kTile = 32;  // tile edge: one warp covers one tile row, 32 floats = 128 contiguous bytes
constexpr int kRows = 4;   // thread rows per block: 32 x 4 = 128 threads, 8 elements per thread

// Task 1: thread (x, y) copies in[row][col] to out[col][row]. A warp reads 32 neighbours of one input
// row (coalesced) but writes 32 elements `rows` floats apart: 32 separate memory sectors per store.
__global__ void transpose_naive_kernel(const float* in, float* out, int rows, int cols) {
  // TODO(student): find the input element this thread owns (x runs along an input row, so a warp reads
  //                neighbours) and, if it lies inside the matrix, copy it to its transposed place. The
  //                output is cols x rows: check each index against its own bound (about 4 lines).
}

void transpose_naive(const float* d_in, float* d_out, int rows, int cols) {
  // TODO(student): launch transpose_naive_kernel on kTile x kRows blocks, with enough blocks in x to
  //                cover cols and in y to cover rows; check the launch (about 4 lines).
}

// Task 2: read a tile with coalesced loads into shared memory, wait for the whole tile, then write it
// out transposed with coalesced stores: the transposition happens in shared memory. Reading a tile
// column, tile[threadIdx.x][j], makes the 32 lanes of a warp hit addresses 32 floats apart: all in the
// same bank, so the access is split into 32 one-at-a-time transactions (a 32-way bank conflict).
__global__ void transpose_tiled_kernel(const float* in, float* out, int rows, int cols) {
  // TODO(student): (about 14 lines)
  //   - Stage one kTile x kTile tile of the input in a __shared__ array, read with coalesced loads
  //     (threadIdx.x along an input row). A block has only kRows rows of threads, so each thread
  //     moves several rows of its tile.
  //   - Wait until the whole tile is in, then write it to the block's tile of the output, again with
  //     threadIdx.x along an output row so that the stores coalesce: the turn happens in shared memory.
  //   - Guard loads with the input's bounds and stores with the output's (cols x rows); keep the
  //     barrier outside every guard, since every thread of the block must reach it.
}

void transpose_tiled(const float* d_in, float* d_out, int rows, int cols) {
  // TODO(student): launch transpose_tiled_kernel: kTile x kRows threads per block, one block per
  //                kTile x kTile tile; check the launch (about 4 lines).
}

// Task 3: the tiled transpose with one extra column of padding. A tile row is now 33 floats long, so
// element (r, c) sits in bank (33 r + c) % 32 = (r + c) % 32: the 32 elements of a column fall in 32
// different banks, and reading a column takes one transaction instead of 32.
__global__ void transpose_padded_kernel(const float* in, float* out, int rows, int cols) {
  // TODO(student): your tiled kernel, its tile padded so a column read is conflict-free (about 14 lines).
}

void transpose_padded(const float* d_in, float* d_out, int rows, int cols) {
  // TODO(student): launch transpose_padded_kernel like the tiled one (about 4 lines).
}

// =============================================================================================
// Part B: C (m x n) = A (m x k) * B (k x n), row-major.
// =============================================================================================

// Task 4: one thread per element of C. x goes along a row of C, so a warp reads 32 neighbours of a
// row of B (coalesced) and one element of A (a broadcast). Every product costs two global loads.
constexpr int kNaiveX = 32;  // threads per block along a row of C
constexpr int kNaiveY = 8;   // threads per block along a column of C

__global__ void matmul_naive_kernel(const float* a, const float* b, float* c, int m, int n, int k) {
  // TODO(student): one thread per element of C (x along a row): if it lies inside C, add up its k
  //                products in a float and store it; each matrix has its own row length (about 6 lines).
}

void matmul_naive(const float* d_a, const float* d_b, float* d_c, int m, int n, int k) {
  // TODO(student): kNaiveX x kNaiveY blocks covering n columns (x) and m rows (y); launch, check
  //                (about 4 lines).
}

// Task 5: a block of kMatTile x kMatTile threads computes a kMatTile x kMatTile tile of C. It walks
// along k one phase at a time: load a tile of A and a tile of B into shared memory (one element per
// thread), wait, accumulate kMatTile products from shared memory, wait again. Each element loaded from
// global memory is now used kMatTile times. Outside the matrices a thread loads 0, which adds nothing.
constexpr int kMatTile = 32;  // 32 x 32 = 1024 threads per block, 2 x 4 KiB of shared memory

__global__ void matmul_tiled_kernel(const float* a, const float* b, float* c, int m, int n, int k) {
  // TODO(student): (about 20 lines)
  //   - Each thread computes one element of the block's tile of C. Walk all of k in phases (the last
  //     may be partial): stage a kMatTile x kMatTile tile of A and one of B in __shared__ arrays, one
  //     element of each per thread (which one is for you to work out), then add up kMatTile products.
  //   - Two hazards per phase: no thread may read a tile before it is complete, nor overwrite it while
  //     a slower warp still reads it. Load 0.0f outside A and B, judged by global indices, not tile ones.
  //   - Never return early: threads outside C still load their share and reach every barrier.
}

void matmul_tiled(const float* d_a, const float* d_b, float* d_c, int m, int n, int k) {
  // TODO(student): kMatTile x kMatTile threads per block, one block per tile of C; launch, check
  //                (about 4 lines).
}

// =============================================================================================
// Challenge: register blocking. Write whatever kernels you need above matmul_fast. What our reference
// combines:
//   - each thread computes a block of C in registers (ours: 8 x 16), so one value read from shared
//     memory feeds 8 or 16 multiply-adds instead of 1 (a 128 x 128 block tile, 128 threads);
//   - store the A tile transposed in shared memory, so both operands are read as float4;
//   - arrange the lanes of a warp so that its float4 reads of shared memory are conflict-free;
//   - a pipeline of 3 shared-memory buffers of 16 k each, filled with asynchronous copies (cp.async):
//     the next k-slices travel from global memory while the block computes on the current one, with
//     no staging registers, and one __syncthreads() per k-slice;
//   - zero-filled copies outside the matrices, and a 16-byte copy path when n is a multiple of 4.
// =============================================================================================

void matmul_fast(const float* d_a, const float* d_b, float* d_c, int m, int n, int k) {
  // TODO(student): the fastest correct matmul you can write; start from your tiled kernel and see the
  //                ideas above. It must handle any m, n, k (about 160 lines for ours).
}
