// Lab 05 contract: the functions the tests call. Do not edit; implement them in matmul.cu.
//
// Every matrix is a dense row-major array of float in device memory (the d_ prefix): element (r, c)
// of a matrix with `cols` columns is at index r * cols + c, with no padding between rows.
// Sizes are at least 1 and need not be multiples of any tile size.
#pragma once

// ---- Part A, warm-up: transpose. out (cols x rows) = transpose of in (rows x cols). ----------------

// One thread per element: reads are coalesced, writes are strided by `rows`.
void transpose_naive(const float* d_in, float* d_out, int rows, int cols);

// A square tile staged through shared memory, so that both the reads and the writes are coalesced.
void transpose_tiled(const float* d_in, float* d_out, int rows, int cols);

// The same, with the tile padded by one column so that reading a tile column has no bank conflicts.
void transpose_padded(const float* d_in, float* d_out, int rows, int cols);

// ---- Part B: matrix multiplication C (m x n) = A (m x k) * B (k x n), single precision. ----------

// One thread per element of C, reading A and B straight from global memory.
void matmul_naive(const float* d_a, const float* d_b, float* d_c, int m, int n, int k);

// Square tiles of A and B staged through shared memory, with __syncthreads() around each phase.
void matmul_tiled(const float* d_a, const float* d_b, float* d_c, int m, int n, int k);

// Challenge: as fast as you can make it, still correct for any m, n, k. Timed against cuBLAS SGEMM
// in pure FP32 (CUBLAS_PEDANTIC_MATH: no TF32 tensor cores).
void matmul_fast(const float* d_a, const float* d_b, float* d_c, int m, int n, int k);
