// Lab 02 contract: the functions the tests call. Do not edit; implement them in indexing.cu.
#pragma once

#include <cuda_runtime.h>

// ---------------------------------------------------------------------------------------------
// Task 1: one global id per thread, for grids and blocks of one, two or three dimensions.
// ---------------------------------------------------------------------------------------------

// The six numbers that say which thread this is: its block in the grid, and itself in the block.
struct ThreadCoords {
  unsigned int block_x, block_y, block_z;
  unsigned int thread_x, thread_y, thread_z;
};

// Given (do not reimplement): what a thread does once it knows its global id. Stores the thread's
// coordinates at coords[id] and counts the write in writes[id]. An id past the end (id >= n) stores
// nothing and is counted in writes[n], so a wrong formula fails a test instead of corrupting memory.
__device__ inline void record_thread(ThreadCoords* coords, unsigned int* writes, unsigned long long id,
                                     unsigned long long n) {
  if (id >= n) {
    atomicAdd(&writes[n], 1u);
    return;
  }
  coords[id] = ThreadCoords{blockIdx.x, blockIdx.y, blockIdx.z, threadIdx.x, threadIdx.y, threadIdx.z};
  atomicAdd(&writes[id], 1u);
}

// Launches a grid of `grid` blocks of `block` threads (any of them 1D, 2D or 3D). Every thread calls
// record_thread with its global id:
//   block number  = blockIdx.x + blockIdx.y * gridDim.x + blockIdx.z * gridDim.x * gridDim.y
//   thread number = threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y
//   id            = block number * (threads per block) + thread number
// so x varies fastest, then y, then z. n = total threads; d_coords has n elements, d_writes n + 1.
void write_global_ids(ThreadCoords* d_coords, unsigned int* d_writes, dim3 grid, dim3 block);

// ---------------------------------------------------------------------------------------------
// Task 2: warps in a 2D block.
// ---------------------------------------------------------------------------------------------

struct WarpLane {
  int warp;  // which warp of its block the thread belongs to
  int lane;  // its place in that warp, 0..31
};

// Launches one block of shape `block` (2D: block.z == 1). The thread at (x, y) stores its warp and
// lane at d_out[y * block.x + x]: d_out is an image of the block, one row per threadIdx.y.
void warp_lane_2d(WarpLane* d_out, dim3 block);

// How many warps a block of this shape occupies (the last one may be partly empty). Host only.
int warps_per_block(dim3 block);

// ---------------------------------------------------------------------------------------------
// Task 3 and 4: a 2D image kernel, then the same with a grid-stride loop.
// ---------------------------------------------------------------------------------------------

// Images are row-major: pixel (x, y), column x of row y, is at index y * width + x.
// Both functions compute, for every pixel of a width x height image,
//   out(x, y) += in(width - 1 - x, y)          (add the mirror image of each row)
// and touch nothing outside the image.

// One thread per pixel: 2D blocks, and a 2D grid rounded up to cover the whole image.
void add_mirrored(const float* d_in, float* d_out, int width, int height);

// On exactly the grid and block given (2D, possibly far smaller than the image): each thread steps
// through the image by the grid's size in threads, in x and in y.
void add_mirrored_grid_stride(const float* d_in, float* d_out, int width, int height, dim3 grid, dim3 block);
