// Lab 04: 2D arrays with padded rows (pitched memory), a map at memory speed, and a 3x3 filter whose
// weights live in constant memory.
// Reference solution. Regions between BEGIN/END SOLUTION are removed from the student's copy, and
// "STUB:" lines become code there (python3 -m grader skeleton --write).
#include "pitched.cuh"

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include <cudalab/check.cuh>
#include <cudalab/launch.cuh>

// Blocks of 32 x 8 threads: each row of a block is one warp reading 32 consecutive floats of a row.
[[maybe_unused]] constexpr int kBlockX = 32;
[[maybe_unused]] constexpr int kBlockY = 8;

// ---------------------------------------------------------------------------------------------
// Task 1: upload and download. cudaMallocPitch pads each row up to an alignment the memory system
// likes and tells you the resulting pitch; cudaMemcpy2D copies `height` rows of `width_bytes` each,
// stepping by the source's and the destination's own pitch.
// ---------------------------------------------------------------------------------------------

PitchedImage upload_pitched(const std::vector<float>& host, int width, int height) {
  PitchedImage image;
  image.width = width;
  image.height = height;
  // TODO(student): cudaMallocPitch a width x height float array into image.data / image.pitch, then
  //                cudaMemcpy2D the host rows into it. Every width and pitch there counts bytes, and
  //                each side steps by its own pitch: the host rows have no padding (about 4 lines).
  // BEGIN SOLUTION
  const std::size_t row_bytes = static_cast<std::size_t>(width) * sizeof(float);
  CUDA_CHECK(cudaMallocPitch(&image.data, &image.pitch, row_bytes, height));
  CUDA_CHECK(cudaMemcpy2D(image.data, image.pitch, host.data(), row_bytes, row_bytes, height,
                          cudaMemcpyHostToDevice));
  // END SOLUTION
  return image;
}

std::vector<float> download_pitched(const PitchedImage& image) {
  std::vector<float> host(static_cast<std::size_t>(image.width) * image.height);
  // TODO(student): cudaMemcpy2D the rows back into the packed host vector, giving each side its own
  //                pitch; the padding must not come back with them (about 3 lines).
  // BEGIN SOLUTION
  const std::size_t row_bytes = static_cast<std::size_t>(image.width) * sizeof(float);
  CUDA_CHECK(cudaMemcpy2D(host.data(), row_bytes, image.data, image.pitch, row_bytes, image.height,
                          cudaMemcpyDeviceToHost));
  // END SOLUTION
  return host;
}

void free_pitched(PitchedImage& image) {
  // TODO(student): cudaFree the data, then reset image to an empty PitchedImage{} (2 lines).
  // BEGIN SOLUTION
  CUDA_CHECK(cudaFree(image.data));
  image = PitchedImage{};
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// Task 2: a map over pitched rows. The pitch is in bytes, so the address of row y is computed on a
// char pointer and only then read as floats.
// ---------------------------------------------------------------------------------------------

__device__ const float* row_ptr(const float* base, std::size_t pitch, int y) {
  // TODO(student): return the start of row y. The pitch counts bytes, but arithmetic on a float*
  //                counts floats; and y * pitch can pass 2^31, so keep it out of int (1 line).
  // BEGIN SOLUTION
  return reinterpret_cast<const float*>(reinterpret_cast<const char*>(base) + static_cast<std::size_t>(y) * pitch);
  // END SOLUTION
  // STUB: return base;
}

__device__ float* row_ptr(float* base, std::size_t pitch, int y) {
  // TODO(student): the same for a writable array (1 line).
  // BEGIN SOLUTION
  return reinterpret_cast<float*>(reinterpret_cast<char*>(base) + static_cast<std::size_t>(y) * pitch);
  // END SOLUTION
  // STUB: return base;
}

// One thread per element; threads outside width x height do nothing, so the padding stays untouched.
__global__ void map_affine_kernel(const float* in, std::size_t in_pitch, float* out, std::size_t out_pitch,
                                  int width, int height, float a, float b) {
  // TODO(student): one thread per pixel: out(x, y) = a * in(x, y) + b, each row found with row_ptr and
  //                its own array's pitch. Threads past the width or the height touch nothing (about 4 lines).
  // BEGIN SOLUTION
  const int x = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int y = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  if (x >= width || y >= height) return;
  row_ptr(out, out_pitch, y)[x] = a * row_ptr(in, in_pitch, y)[x] + b;
  // END SOLUTION
}

void map_affine(const float* d_in, std::size_t in_pitch, float* d_out, std::size_t out_pitch, int width,
                int height, float a, float b) {
  if (width <= 0 || height <= 0) return;
  // TODO(student): kBlockX x kBlockY blocks, a grid covering width x height, launch, check (about 4 lines).
  // BEGIN SOLUTION
  const dim3 block(kBlockX, kBlockY);
  const dim3 grid(cudalab::ceil_div(width, kBlockX), cudalab::ceil_div(height, kBlockY));
  map_affine_kernel<<<grid, block>>>(d_in, in_pitch, d_out, out_pitch, width, height, a, b);
  CUDA_CHECK_LAST();
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// Challenge: the map at memory speed. One element per thread leaves too few loads in flight to keep
// HBM busy. Here a 32 x 8 block covers a 32 x 32 tile: each thread issues the loads of its kRows
// rows (8 apart) before its first store, so four independent loads per thread are in flight.
// ---------------------------------------------------------------------------------------------

[[maybe_unused]] constexpr int kRows = 4;                 // rows per thread
[[maybe_unused]] constexpr int kTileY = kBlockY * kRows;  // rows per block: 32

__global__ void map_affine_fast_kernel(const float* __restrict__ in, std::size_t in_pitch, float* __restrict__ out,
                                       std::size_t out_pitch, int width, int height, float a, float b) {
  // TODO(student): the fastest correct kernel you can write. Idea: a block covers kTileY rows, and each
  //                thread issues the loads of all its kRows rows before its first store. The threads of a
  //                block must cover every row of the tile once; guard each row, the last tile may be partial.
  // BEGIN SOLUTION
  const int x = static_cast<int>(blockIdx.x * kBlockX + threadIdx.x);
  const int y0 = static_cast<int>(blockIdx.y * kTileY + threadIdx.y);
  if (x >= width) return;
  float v[kRows];
#pragma unroll
  for (int k = 0; k < kRows; ++k) {  // all loads first: they overlap in the memory system
    const int y = y0 + k * kBlockY;
    v[k] = y < height ? row_ptr(in, in_pitch, y)[x] : 0.0f;
  }
#pragma unroll
  for (int k = 0; k < kRows; ++k) {
    const int y = y0 + k * kBlockY;
    if (y < height) row_ptr(out, out_pitch, y)[x] = a * v[k] + b;
  }
  // END SOLUTION
}

void map_affine_fast(const float* d_in, std::size_t in_pitch, float* d_out, std::size_t out_pitch, int width,
                     int height, float a, float b) {
  if (width <= 0 || height <= 0) return;
  // TODO(student): launch your kernel and check it (about 4 lines).
  // BEGIN SOLUTION
  const dim3 block(kBlockX, kBlockY);
  const dim3 grid(cudalab::ceil_div(width, kBlockX), cudalab::ceil_div(height, kTileY));
  map_affine_fast_kernel<<<grid, block>>>(d_in, in_pitch, d_out, out_pitch, width, height, a, b);
  CUDA_CHECK_LAST();
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// Task 3: a 3x3 filter. The weights are the same for every thread and every pixel, so they go in
// constant memory: a small cached space that broadcasts one address to a whole warp in one read.
// ---------------------------------------------------------------------------------------------

__constant__ float c_weights[9];  // w[r * 3 + c] weighs the neighbour (x + c - 1, y + r - 1)

void set_filter_weights(const float weights[9]) {
  // TODO(student): copy the 9 weights into c_weights with cudaMemcpyToSymbol, checked (1 line).
  // BEGIN SOLUTION
  CUDA_CHECK(cudaMemcpyToSymbol(c_weights, weights, 9 * sizeof(float)));
  // END SOLUTION
}

// One thread per output pixel. Neighbours outside the image are clamped to the edge, so every read
// stays inside the rows (never in the padding, never outside the array).
__global__ void filter3x3_kernel(const float* in, std::size_t in_pitch, float* out, std::size_t out_pitch, int width,
                                 int height) {
  // TODO(student): one thread per pixel stores the weighted sum of its 3x3 neighbourhood (the formula and
  //                the order of the weights are in the README). Clamp each neighbour's row and column into
  //                the image, so no read leaves it; threads outside the image store nothing (about 12 lines).
  // BEGIN SOLUTION
  const int x = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int y = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  if (x >= width || y >= height) return;
  float sum = 0.0f;
#pragma unroll
  for (int r = 0; r < 3; ++r) {
    const int yy = min(max(y + r - 1, 0), height - 1);
    const float* row = row_ptr(in, in_pitch, yy);
#pragma unroll
    for (int c = 0; c < 3; ++c) {
      const int xx = min(max(x + c - 1, 0), width - 1);
      sum += c_weights[r * 3 + c] * row[xx];
    }
  }
  row_ptr(out, out_pitch, y)[x] = sum;
  // END SOLUTION
}

void filter3x3(const float* d_in, std::size_t in_pitch, float* d_out, std::size_t out_pitch, int width, int height) {
  if (width <= 0 || height <= 0) return;
  // TODO(student): launch filter3x3_kernel over width x height with kBlockX x kBlockY blocks and check
  //                it (about 4 lines).
  // BEGIN SOLUTION
  const dim3 block(kBlockX, kBlockY);
  const dim3 grid(cudalab::ceil_div(width, kBlockX), cudalab::ceil_div(height, kBlockY));
  filter3x3_kernel<<<grid, block>>>(d_in, in_pitch, d_out, out_pitch, width, height);
  CUDA_CHECK_LAST();
  // END SOLUTION
}
