// Lab 02 tests. Every test here judges correctness; this lab has no perf test.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include <cudalab/check.cuh>
#include <cudalab/compare.hpp>
#include <cudalab/device_buffer.cuh>
#include <cudalab/gtest_cuda.hpp>
#include <cudalab/random.hpp>

#include "indexing.cuh"

namespace {

using cudalab::AllEqual;
using cudalab::DeviceBuffer;
using cudalab::Shape2D;

constexpr std::uint64_t kSeed = 2002;

std::string dims(dim3 d) {
  return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
}

// --- Task 1: global ids --------------------------------------------------------------------------

struct LaunchShape {
  dim3 grid, block;
};
void PrintTo(const LaunchShape& s, std::ostream* os) { *os << "grid " << dims(s.grid) << ", block " << dims(s.block); }

class IndexingGlobalIdCorrectness : public cudalab::GpuTestWithParam<LaunchShape> {};

// Every thread's coordinates must land at the id the formula gives, and every id must be written
// exactly once (the write counts come from atomicAdd in record_thread). No dimension is square, so
// an x/y or y/z swap moves records.
TEST_P(IndexingGlobalIdCorrectness, EveryIdWrittenOnceWithItsThread) {
  const dim3 grid = GetParam().grid, block = GetParam().block;
  const std::size_t per_block = static_cast<std::size_t>(block.x) * block.y * block.z;
  const std::size_t n = static_cast<std::size_t>(grid.x) * grid.y * grid.z * per_block;
  CUDALAB_SKIP_IF_LARGE(n);

  std::vector<unsigned int> expected(6 * n);
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx)
        for (unsigned tz = 0; tz < block.z; ++tz)
          for (unsigned ty = 0; ty < block.y; ++ty)
            for (unsigned tx = 0; tx < block.x; ++tx) {
              const std::size_t b = bx + grid.x * (by + static_cast<std::size_t>(grid.y) * bz);
              const std::size_t t = tx + block.x * (ty + static_cast<std::size_t>(block.y) * tz);
              const std::size_t id = b * per_block + t;
              const unsigned v[6] = {bx, by, bz, tx, ty, tz};
              std::memcpy(&expected[6 * id], v, sizeof v);
            }

  DeviceBuffer<ThreadCoords> d_coords(n);
  DeviceBuffer<unsigned int> d_writes(n + 1);
  cudalab::poison(d_coords);  // 0xA5A5A5A5: a record nobody wrote cannot match
  d_writes.fill_bytes(0);     // counters start at zero
  write_global_ids(d_coords.data(), d_writes.data(), grid, block);
  CUDA_CHECK(cudaDeviceSynchronize());

  const std::vector<ThreadCoords> coords = d_coords.to_host();
  std::vector<unsigned int> actual(6 * n);
  std::memcpy(actual.data(), coords.data(), n * sizeof(ThreadCoords));
  const std::vector<unsigned int> writes = d_writes.to_host();
  const std::vector<unsigned int> writes_in(writes.begin(), writes.begin() + n);
  EXPECT_TRUE(AllEqual(std::vector<unsigned int>(n, 1u), writes_in, kSeed))
      << "how many times each id was written (must be exactly 1); grid " << dims(grid) << ", block " << dims(block);
  EXPECT_EQ(writes[n], 0u) << writes[n] << " threads computed an id >= n = " << n << " (outside the output)";
  EXPECT_TRUE(AllEqual(expected, actual, kSeed, Shape2D{n, 6}))
      << "row = id; columns = blockIdx.x, .y, .z, threadIdx.x, .y, .z of the thread that should own it";
}
INSTANTIATE_TEST_SUITE_P(
    , IndexingGlobalIdCorrectness,
    ::testing::Values(LaunchShape{dim3(1), dim3(1)},              // a single thread
                      LaunchShape{dim3(5), dim3(64)},             // 1D grid of 1D blocks
                      LaunchShape{dim3(2, 2, 2), dim3(32)},       // 3D grid of 1D blocks
                      LaunchShape{dim3(3, 4), dim3(16, 8)},       // 2D grid of 2D blocks
                      LaunchShape{dim3(5, 1, 3), dim3(6, 7)},     // 3D grid of 2D blocks
                      LaunchShape{dim3(7), dim3(4, 3, 5)},        // 1D grid of 3D blocks
                      LaunchShape{dim3(3, 5), dim3(10, 1, 3)},    // 2D grid of 3D blocks
                      LaunchShape{dim3(2, 3, 4), dim3(8, 4, 2)},  // 3D grid of 3D blocks
                      LaunchShape{dim3(129, 3, 2), dim3(8, 8, 4)}),
    [](const ::testing::TestParamInfo<LaunchShape>& info) {
      return "grid" + dims(info.param.grid) + "_block" + dims(info.param.block);
    });

// --- Task 2: warps in a 2D block -----------------------------------------------------------------

struct Block2D {
  unsigned int x, y;
};
void PrintTo(const Block2D& b, std::ostream* os) { *os << "block " << b.x << " x " << b.y; }

class IndexingWarpCorrectness : public cudalab::GpuTestWithParam<Block2D> {};

// Non-square blocks, and widths that are not multiples of 32, so warps span rows unevenly and an
// x/y swap changes the answer.
TEST_P(IndexingWarpCorrectness, WarpAndLaneOfEveryThread) {
  const Block2D b = GetParam();
  const std::size_t n = static_cast<std::size_t>(b.x) * b.y;
  std::vector<int> expected_warp(n), expected_lane(n);
  for (std::size_t i = 0; i < n; ++i) {  // i = y * b.x + x is also the thread's number
    expected_warp[i] = static_cast<int>(i / 32);
    expected_lane[i] = static_cast<int>(i % 32);
  }
  DeviceBuffer<WarpLane> d_out(n);
  cudalab::poison(d_out);
  warp_lane_2d(d_out.data(), dim3(b.x, b.y));
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<WarpLane> out = d_out.to_host();
  std::vector<int> warp(n), lane(n);
  for (std::size_t i = 0; i < n; ++i) {
    warp[i] = out[i].warp;
    lane[i] = out[i].lane;
  }
  EXPECT_TRUE(AllEqual(expected_warp, warp, kSeed, Shape2D{b.y, b.x}))
      << "warp of each thread of a " << b.x << " x " << b.y << " block, shown as [row threadIdx.y, col threadIdx.x]";
  EXPECT_TRUE(AllEqual(expected_lane, lane, kSeed, Shape2D{b.y, b.x}))
      << "lane of each thread of a " << b.x << " x " << b.y << " block, shown as [row threadIdx.y, col threadIdx.x]";
}
INSTANTIATE_TEST_SUITE_P(, IndexingWarpCorrectness,
                         ::testing::Values(Block2D{32, 4}, Block2D{16, 16}, Block2D{24, 5}, Block2D{7, 9},
                                           Block2D{1, 64}, Block2D{33, 3}, Block2D{3, 100}, Block2D{64, 16}),
                         [](const ::testing::TestParamInfo<Block2D>& info) {
                           return std::to_string(info.param.x) + "x" + std::to_string(info.param.y);
                         });

// Host only: runs without a GPU.
TEST(IndexingWarpCountCorrectness, WarpsPerBlock) {
  const std::vector<dim3> blocks = {dim3(1), dim3(32), dim3(33), dim3(7, 9), dim3(24, 5), dim3(32, 32),
                                    dim3(8, 4, 2), dim3(10, 10, 10), dim3(3, 5, 7)};
  const std::vector<int> expected = {1, 1, 2, 2, 4, 32, 2, 32, 4};
  std::vector<int> actual;
  for (const dim3& b : blocks) actual.push_back(warps_per_block(b));
  EXPECT_TRUE(AllEqual(expected, actual, 0))
      << "blocks 1, 32, 33, 7x9, 24x5, 32x32, 8x4x2, 10x10x10, 3x5x7 threads";
}

// --- Task 3 and 4: the 2D image kernel -----------------------------------------------------------

struct Image {
  int width, height;
};
void PrintTo(const Image& s, std::ostream* os) { *os << s.width << " wide x " << s.height << " high"; }
std::string image_name(const Image& s) { return std::to_string(s.width) + "x" + std::to_string(s.height); }

// Runs one add_mirrored variant and checks it. The input and output each sit at the start of a buffer
// twice their size whose tail is NaN: a read past the image gives NaN, and a write past it shows up
// in the tail instead of faulting. Pixel values are integers in float, so every sum is exact.
template <class Launch>
void check_add_mirrored(const Image& s, std::uint64_t seed, const std::string& what, Launch launch) {
  const int w = s.width, h = s.height;
  const std::size_t n = static_cast<std::size_t>(w) * h;
  const std::size_t guard = n + 4096;
  std::vector<float> in(n), base(n), expected(n);
  const auto in_i = cudalab::random_vector<int>(n, seed, 1, 1000);
  const auto base_i = cudalab::random_vector<int>(n, seed + 1, 10000, 20000);
  for (std::size_t i = 0; i < n; ++i) {
    in[i] = static_cast<float>(in_i[i]);
    base[i] = static_cast<float>(base_i[i]);
  }
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const std::size_t row = static_cast<std::size_t>(y) * w;
      expected[row + x] = base[row + x] + in[row + (w - 1 - x)];
    }

  DeviceBuffer<float> d_in(n + guard), d_out(n + guard);
  cudalab::poison(d_in);  // 0xFF bytes: NaN
  cudalab::poison(d_out);
  CUDA_CHECK(cudaMemcpy(d_in.data(), in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d_out.data(), base.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  launch(d_in.data(), d_out.data());
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> out = d_out.to_host();

  const std::vector<float> image(out.begin(), out.begin() + n);
  EXPECT_TRUE(AllEqual(expected, image, seed, Shape2D{static_cast<std::size_t>(h), static_cast<std::size_t>(w)}))
      << what << " on a " << w << " x " << h << " image (shown as [row y, col x]); an element still equal to "
      << "its old value was never written, one with twice the input added was written twice";
  std::size_t touched = 0, first = 0;
  for (std::size_t i = n; i < out.size(); ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, &out[i], sizeof bits);
    if (bits != 0xFFFFFFFFu && touched++ == 0) first = i - n;
  }
  EXPECT_EQ(touched, 0u) << what << " wrote " << touched << " elements past the end of the " << w << " x " << h
                         << " image (the first at image end + " << first
                         << "): check the guard (x < width, y < height) and that x is the column";
}

const std::vector<Image> kImages = {{1, 1},   {76, 62},  {62, 76}, {33, 17},  {17, 33},    {32, 8},
                                    {1, 500}, {500, 1},  {64, 64}, {4097, 3}, {1000, 999}, {1920, 1080}};

class IndexingImageCorrectness : public cudalab::GpuTestWithParam<Image> {};

TEST_P(IndexingImageCorrectness, AddMirrored) {
  const Image s = GetParam();
  CUDALAB_SKIP_IF_LARGE(static_cast<std::size_t>(s.width) * s.height);
  check_add_mirrored(s, kSeed + s.width * 7919 + s.height, "add_mirrored",
                     [&](const float* in, float* out) { add_mirrored(in, out, s.width, s.height); });
}
INSTANTIATE_TEST_SUITE_P(, IndexingImageCorrectness, ::testing::ValuesIn(kImages),
                         [](const ::testing::TestParamInfo<Image>& info) { return image_name(info.param); });

struct StrideCase {
  Image image;
  dim3 grid, block;
};
void PrintTo(const StrideCase& c, std::ostream* os) {
  *os << image_name(c.image) << " image, grid " << dims(c.grid) << ", block " << dims(c.block);
}

class IndexingGridStrideCorrectness : public cudalab::GpuTestWithParam<StrideCase> {};

// Grids far smaller than the image: each thread visits many pixels, in both directions.
TEST_P(IndexingGridStrideCorrectness, AddMirroredOnASmallGrid) {
  const StrideCase c = GetParam();
  CUDALAB_SKIP_IF_LARGE(static_cast<std::size_t>(c.image.width) * c.image.height);
  check_add_mirrored(c.image, kSeed + 3 * c.image.width + c.grid.x, "add_mirrored_grid_stride",
                     [&](const float* in, float* out) {
                       add_mirrored_grid_stride(in, out, c.image.width, c.image.height, c.grid, c.block);
                     });
}
INSTANTIATE_TEST_SUITE_P(
    , IndexingGridStrideCorrectness,
    ::testing::Values(StrideCase{{1, 1}, dim3(1, 1), dim3(32, 8)},        // more threads than pixels
                      StrideCase{{33, 17}, dim3(1, 1), dim3(8, 8)},       // one small block
                      StrideCase{{76, 62}, dim3(2, 3), dim3(16, 16)},
                      StrideCase{{17, 33}, dim3(3, 1), dim3(4, 2)},
                      StrideCase{{500, 1}, dim3(2, 2), dim3(4, 4)},
                      StrideCase{{1, 500}, dim3(2, 2), dim3(4, 4)},
                      StrideCase{{4097, 3}, dim3(3, 1), dim3(128, 2)},
                      StrideCase{{1000, 999}, dim3(1, 1), dim3(32, 8)},   // every thread visits ~3900 pixels
                      StrideCase{{1000, 999}, dim3(5, 7), dim3(32, 4)}),
    [](const ::testing::TestParamInfo<StrideCase>& info) {
      return image_name(info.param.image) + "_grid" + std::to_string(info.param.grid.x) + "x" +
             std::to_string(info.param.grid.y) + "_block" + std::to_string(info.param.block.x) + "x" +
             std::to_string(info.param.block.y);
    });

}  // namespace
