// Lab 02: from thread coordinates to the data a thread owns, in one, two and three dimensions.
// Reference solution. Regions between BEGIN/END SOLUTION are removed from the student's copy, and
// "STUB:" lines become code there (python3 -m grader skeleton --write).
#include "indexing.cuh"

#include <cuda_runtime.h>

#include <cudalab/check.cuh>
#include <cudalab/launch.cuh>

// Threads per warp on every NVIDIA GPU so far (device code can also read the built-in warpSize).
[[maybe_unused]] constexpr int kWarp = 32;
// Image blocks of 32 x 8 = 256 threads: each row of a block is one warp, reading one row of pixels.
[[maybe_unused]] constexpr int kImageBlockX = 32;
[[maybe_unused]] constexpr int kImageBlockY = 8;

// ---------------------------------------------------------------------------------------------
// Task 1: global ids. Number the blocks of the grid, then the threads of a block, x fastest in both;
// a thread's id is its block's number times the block size plus its own number in the block.
// ---------------------------------------------------------------------------------------------

__global__ void global_id_kernel(ThreadCoords* coords, unsigned int* writes, unsigned long long n) {
  // TODO(student): compute this thread's global id with the formula in indexing.cuh, in
  //                unsigned long long, and call record_thread(coords, writes, id, n) (about 6 lines).
  // BEGIN SOLUTION
  const unsigned long long block = blockIdx.x + static_cast<unsigned long long>(gridDim.x) *
                                                    (blockIdx.y + static_cast<unsigned long long>(gridDim.y) * blockIdx.z);
  const unsigned long long thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned long long threads_per_block = blockDim.x * blockDim.y * blockDim.z;
  record_thread(coords, writes, block * threads_per_block + thread, n);
  // END SOLUTION
}

void write_global_ids(ThreadCoords* d_coords, unsigned int* d_writes, dim3 grid, dim3 block) {
  // TODO(student): n = all the threads of the grid (in unsigned long long); launch global_id_kernel
  //                on grid x block and check the launch (about 4 lines).
  // BEGIN SOLUTION
  const unsigned long long n = static_cast<unsigned long long>(grid.x) * grid.y * grid.z * block.x * block.y * block.z;
  global_id_kernel<<<grid, block>>>(d_coords, d_writes, n);
  CUDA_CHECK_LAST();
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// Task 2: warps. The hardware numbers the threads of a block x fastest, then y, then z, and cuts that
// sequence into warps of 32: a warp can span several rows of a 2D block.
// ---------------------------------------------------------------------------------------------

__global__ void warp_lane_kernel(WarpLane* out) {
  // TODO(student): this thread's warp and lane, cut from its number in the block as the hardware
  //                counts (a warp may end mid-row), stored at its place in the block image (about 3 lines).
  // BEGIN SOLUTION
  const int t = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x);
  out[t] = WarpLane{t / kWarp, t % kWarp};
  // END SOLUTION
}

void warp_lane_2d(WarpLane* d_out, dim3 block) {
  // TODO(student): launch warp_lane_kernel as one block of shape `block`, and check it (2 lines).
  // BEGIN SOLUTION
  warp_lane_kernel<<<1, block>>>(d_out);
  CUDA_CHECK_LAST();
  // END SOLUTION
}

int warps_per_block(dim3 block) {
  // TODO(student): threads in the block, rounded up to whole warps (about 2 lines).
  // BEGIN SOLUTION
  const int threads = static_cast<int>(block.x * block.y * block.z);
  return cudalab::ceil_div(threads, kWarp);
  // END SOLUTION
  // STUB: return 0;
}

// ---------------------------------------------------------------------------------------------
// Task 3: one thread per pixel. The grid is rounded up to whole blocks, so the right-most blocks
// and the bottom blocks have threads outside the image: the guard sends them home.
// ---------------------------------------------------------------------------------------------

__global__ void add_mirrored_kernel(const float* in, float* out, int width, int height) {
  // TODO(student): this thread's pixel, the column on the .x components and the row on the .y. A thread
  //                past either edge of the image must do nothing; the others apply indexing.cuh's update
  //                to their pixel (row-major; the row's offset in 64 bits) (about 4 lines).
  // BEGIN SOLUTION
  const int x = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  const int y = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y);
  if (x >= width || y >= height) return;
  const long long row = static_cast<long long>(y) * width;
  out[row + x] += in[row + (width - 1 - x)];
  // END SOLUTION
}

void add_mirrored(const float* d_in, float* d_out, int width, int height) {
  if (width <= 0 || height <= 0) return;
  // TODO(student): a dim3 block of kImageBlockX x kImageBlockY, a dim3 grid that covers width
  //                columns and height rows (cudalab::ceil_div), launch, check (about 4 lines).
  // BEGIN SOLUTION
  const dim3 block(kImageBlockX, kImageBlockY);
  const dim3 grid(cudalab::ceil_div(width, kImageBlockX), cudalab::ceil_div(height, kImageBlockY));
  add_mirrored_kernel<<<grid, block>>>(d_in, d_out, width, height);
  CUDA_CHECK_LAST();
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// Task 4: a grid-stride loop in 2D. Whatever the grid, the threads tile the image like a stamp:
// start at your own (x, y), then step by the grid's width and height in threads.
// ---------------------------------------------------------------------------------------------

__global__ void add_mirrored_grid_stride_kernel(const float* in, float* out, int width, int height) {
  // TODO(student): on the caller's grid (often far smaller than the image) loop, y outside and x inside,
  //                so that the threads together visit every pixel exactly once: each starts at its own
  //                pixel, and each step moves the whole grid on, each axis by its own sizes (about 7 lines).
  // BEGIN SOLUTION
  const int stride_x = static_cast<int>(gridDim.x * blockDim.x);
  const int stride_y = static_cast<int>(gridDim.y * blockDim.y);
  for (int y = static_cast<int>(blockIdx.y * blockDim.y + threadIdx.y); y < height; y += stride_y) {
    const long long row = static_cast<long long>(y) * width;
    for (int x = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); x < width; x += stride_x) {
      out[row + x] += in[row + (width - 1 - x)];
    }
  }
  // END SOLUTION
}

void add_mirrored_grid_stride(const float* d_in, float* d_out, int width, int height, dim3 grid, dim3 block) {
  // TODO(student): launch the grid-stride kernel on exactly grid x block and check it (2 lines).
  // BEGIN SOLUTION
  add_mirrored_grid_stride_kernel<<<grid, block>>>(d_in, d_out, width, height);
  CUDA_CHECK_LAST();
  // END SOLUTION
}
