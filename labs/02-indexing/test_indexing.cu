// Lab 02 tests. Every test here judges correctness; this lab has no perf test.
#include <gtest/gtest.h>

#include <cuda.h>
#include <cudaTypedefs.h>  // the driver's function types (PFN_cuMemMap_v10020, ...)

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <cudalab/check.cuh>
#include <cudalab/compare.hpp>
#include <cudalab/device_buffer.cuh>
#include <cudalab/gtest_cuda.hpp>
#include <cudalab/guarded_buffer.cuh>
#include <cudalab/kernel_launches.hpp>
#include <cudalab/random.hpp>

#include "indexing.cuh"

namespace {

using cudalab::AllEqual;
using cudalab::DeviceBuffer;
using cudalab::GuardedBuffer;
using cudalab::Shape2D;

constexpr std::uint64_t kSeed = 2002;

std::string dims(dim3 d) {
  return std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
}

// A block of 64 x 32 = 2048 threads: more than any block may hold, so the launch never runs.
const dim3 kTooBigBlock(64, 32);

// How many elements of `v` differ from the poison: a launch that never ran must have written none.
template <class T>
std::size_t written(const std::vector<T>& v) {
  const T poison = cudalab::poison_value<T>();
  return static_cast<std::size_t>(std::count_if(v.begin(), v.end(), [&](const T& x) {
    return std::memcmp(&x, &poison, sizeof(T)) != 0;
  }));
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

  GuardedBuffer<ThreadCoords> d_coords(n);
  GuardedBuffer<unsigned int> d_writes(n + 1);
  cudalab::poison(d_coords);  // 0xA5A5A5A5: a record nobody wrote cannot match
  d_writes.fill_bytes(0);     // counters start at zero
  write_global_ids(d_coords.data(), d_writes.data(), grid, block);
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(d_coords.guards_intact("the coordinates"));
  EXPECT_TRUE(d_writes.guards_intact("the write counts"));

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

class IndexingGlobalIdLaunchCorrectness : public cudalab::GpuTest {};

// write_global_ids checks its launch: a block that cannot run throws, and nothing is written.
TEST_F(IndexingGlobalIdLaunchCorrectness, ThrowsOnABadLaunch) {
  const dim3 grid(3);
  const std::size_t n = 3 * static_cast<std::size_t>(kTooBigBlock.x) * kTooBigBlock.y;
  GuardedBuffer<ThreadCoords> d_coords(n);
  GuardedBuffer<unsigned int> d_writes(n + 1);
  cudalab::poison(d_coords);
  d_writes.fill_bytes(0);
  EXPECT_TRUE(cudalab::launch_error_reported(
      [&] { write_global_ids(d_coords.data(), d_writes.data(), grid, kTooBigBlock); },
      "write_global_ids(d_coords, d_writes, grid " + dims(grid) + ", block " + dims(kTooBigBlock) + ")"));
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(d_coords.guards_intact("the coordinates"));
  EXPECT_TRUE(d_writes.guards_intact("the write counts"));
  EXPECT_EQ(written(d_coords.to_host()), 0u) << "coordinates were written by a launch that cannot run";
  const std::vector<unsigned int> writes = d_writes.to_host();
  EXPECT_EQ(std::count(writes.begin(), writes.end(), 0u), static_cast<std::ptrdiff_t>(n + 1))
      << "write counts changed in a launch that cannot run";
}

// --- Task 1 at scale: a grid of more than 2^32 threads -------------------------------------------
//
// 2^32 + k threads would need 24 bytes of coordinates and 4 bytes of counter each: about 120 GB, more
// than any GPU has. So the test maps one piece of memory (a few hundred MiB) over and over into one
// long range of virtual addresses, with the driver's virtual memory management (cuMemCreate,
// cuMemAddressReserve, cuMemMap): every address the contract promises is valid, and element i of the
// range is element i % period of the piece. Coordinates written there overwrite each other (the small
// grids above check them); counters still add up, so counter j of the piece must end up holding the
// number of ids in [0, n) that fall on it.

// The driver functions, found through the runtime: the test binary does not link libcuda itself, so it
// still starts, and lists its tests, on a machine without a driver.
struct Vmm {
  PFN_cuDeviceGetAttribute_v2000 device_attribute = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 granularity = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemAddressReserve_v10020 reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
};

template <class Fn>
bool driver_entry_point(const char* name, Fn& fn, std::string& why) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  constexpr unsigned int kAbiVersion = 12000;  // the functions as CUDA 12.0 defined them
  if (cudaGetDriverEntryPointByVersion(name, &p, kAbiVersion, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess || p == nullptr) {
    cudaGetLastError();
    why = std::string("the driver does not provide ") + name;
    return false;
  }
  fn = reinterpret_cast<Fn>(p);
  return true;
}

bool load_vmm(Vmm& v, std::string& why) {
  return driver_entry_point("cuDeviceGetAttribute", v.device_attribute, why) &&
         driver_entry_point("cuMemGetAllocationGranularity", v.granularity, why) &&
         driver_entry_point("cuMemCreate", v.create, why) && driver_entry_point("cuMemRelease", v.release, why) &&
         driver_entry_point("cuMemAddressReserve", v.reserve, why) &&
         driver_entry_point("cuMemAddressFree", v.address_free, why) && driver_entry_point("cuMemMap", v.map, why) &&
         driver_entry_point("cuMemUnmap", v.unmap, why) && driver_entry_point("cuMemSetAccess", v.set_access, why);
}

void driver_check(CUresult result, const char* expr) {
  if (result != CUDA_SUCCESS) {
    throw std::runtime_error(std::string("driver call ") + expr + " failed with CUresult " + std::to_string(result));
  }
}
#define DRIVER_CHECK(expr) driver_check((expr), #expr)

// `bytes` of virtual addresses backed by one piece of about `piece_target` bytes, mapped end to end.
class AliasedRange {
 public:
  AliasedRange(const Vmm& vmm, int device, std::size_t bytes, std::size_t piece_target) : vmm_(vmm) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    std::size_t granule = 0;
    DRIVER_CHECK(vmm_.granularity(&granule, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    // An odd number of granules: the period is then not a power of two, so two ids 2^32 apart (which a
    // 32-bit id confuses) land on different elements of the piece.
    piece_ = (std::max<std::size_t>(1, piece_target / granule) | 1) * granule;
    size_ = (bytes + piece_ - 1) / piece_ * piece_;
    try {
      DRIVER_CHECK(vmm_.create(&handle_, piece_, &prop, 0));
      created_ = true;
      DRIVER_CHECK(vmm_.reserve(&base_, size_, 0, 0, 0));
      CUmemAccessDesc access{};
      access.location = prop.location;
      access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      for (std::size_t offset = 0; offset < size_; offset += piece_) {
        DRIVER_CHECK(vmm_.map(base_ + offset, piece_, 0, handle_, 0));
        ++mapped_;
        DRIVER_CHECK(vmm_.set_access(base_ + offset, piece_, &access, 1));
      }
    } catch (...) {
      release();
      throw;
    }
  }
  AliasedRange(const AliasedRange&) = delete;
  AliasedRange& operator=(const AliasedRange&) = delete;
  ~AliasedRange() { release(); }

  void* data() const { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(base_)); }
  std::size_t piece_bytes() const { return piece_; }

 private:
  void release() {  // never throws: the destructor calls it
    cudaDeviceSynchronize();
    for (std::size_t i = 0; i < mapped_; ++i) vmm_.unmap(base_ + i * piece_, piece_);
    mapped_ = 0;
    if (base_ != 0) vmm_.address_free(base_, size_);
    base_ = 0;
    if (created_) vmm_.release(handle_);
    created_ = false;
  }

  Vmm vmm_;
  CUmemGenericAllocationHandle handle_{};
  bool created_ = false;
  CUdeviceptr base_ = 0;
  std::size_t piece_ = 0, size_ = 0, mapped_ = 0;
};

__global__ void zero_kernel(unsigned int* out, unsigned long long count) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    out[i] = 0;
}

// Counter j of a piece of `period` counters must hold how many ids in [0, n) are j modulo period.
// Counts the counters that do not, and finds the first of them.
__global__ void count_wrong_counters(const unsigned int* counters, unsigned long long period, unsigned long long n,
                                     unsigned long long* wrong, unsigned long long* first_wrong) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long j = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x; j < period;
       j += stride) {
    const unsigned long long expected = n / period + (j < n % period ? 1 : 0);
    if (counters[j] != expected) {
      atomicAdd(wrong, 1ull);
      atomicMin(first_wrong, j);
    }
  }
}

class IndexingGlobalIdLargeCorrectness : public cudalab::GpuTest {};

// 2049 x 1025 x 2 blocks of 16 x 8 x 8 threads: 4,301,260,800 threads, 2^32 + 6,293,504. Counted in
// 32 bits, n wraps to 6,293,504; an id computed in 32 bits wraps too.
TEST_F(IndexingGlobalIdLargeCorrectness, MoreThan2To32Threads) {
  const dim3 grid(2049, 1025, 2), block(16, 8, 8);
  const unsigned long long n = 1ull * grid.x * grid.y * grid.z * block.x * block.y * block.z;
  CUDALAB_SKIP_IF_LARGE(n);
  constexpr std::size_t kPiece = std::size_t{256} << 20;  // bytes of real memory behind each range
  Vmm vmm;
  std::string why;
  if (!load_vmm(vmm, why)) CUDALAB_SKIP("a grid of 2^32 threads needs virtual memory management: " << why);
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  int supported = 0;
  DRIVER_CHECK(vmm.device_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device));
  if (!supported) CUDALAB_SKIP("this GPU has no virtual memory management (cuMemMap): a grid of 2^32 threads cannot be tested");
  CUDALAB_SKIP_UNLESS_GPU_MEMORY(2 * kPiece);

  AliasedRange coords(vmm, device, n * sizeof(ThreadCoords), kPiece);
  AliasedRange writes(vmm, device, (n + 1) * sizeof(unsigned int), kPiece);
  auto* counters = static_cast<unsigned int*>(writes.data());
  const unsigned long long period = writes.piece_bytes() / sizeof(unsigned int);
  zero_kernel<<<1024, 256>>>(counters, period);  // the piece: every counter of the whole range
  CUDA_CHECK_LAST();
  write_global_ids(static_cast<ThreadCoords*>(coords.data()), counters, grid, block);
  CUDA_CHECK(cudaDeviceSynchronize());

  DeviceBuffer<unsigned long long> d_wrong(std::vector<unsigned long long>{0ull, ~0ull});
  count_wrong_counters<<<1024, 256>>>(counters, period, n, d_wrong.data(), d_wrong.data() + 1);
  CUDA_CHECK_LAST();
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<unsigned long long> wrong = d_wrong.to_host();
  if (wrong[0] == 0) return;
  const unsigned long long j = wrong[1];
  unsigned int actual = 0;
  CUDA_CHECK(cudaMemcpy(&actual, counters + j, sizeof actual, cudaMemcpyDeviceToHost));
  ADD_FAILURE() << "grid " << dims(grid) << " of blocks " << dims(block) << " has n = " << n
                << " threads, more than 2^32. The write counts are kept " << period
                << " ids to a counter (id i counts at counter i % " << period << "); " << wrong[0] << " of the "
                << period << " counters are wrong, the first: counter " << j << " was written " << actual
                << " times, expected " << n / period + (j < n % period ? 1 : 0)
                << ". Compute n (all the threads of the grid) and each id in unsigned long long: in 32 bits "
                   "they wrap at 2^32.";
}

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
  GuardedBuffer<WarpLane> d_out(n);
  cudalab::poison(d_out);
  warp_lane_2d(d_out.data(), dim3(b.x, b.y));
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(d_out.guards_intact("the block image"));
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
                           return "block" + std::to_string(info.param.x) + "x" + std::to_string(info.param.y);
                         });

class IndexingWarpLaunchCorrectness : public cudalab::GpuTest {};

// warp_lane_2d checks its launch: a block that cannot run throws, and nothing is written.
TEST_F(IndexingWarpLaunchCorrectness, ThrowsOnABadLaunch) {
  const std::size_t n = static_cast<std::size_t>(kTooBigBlock.x) * kTooBigBlock.y;
  GuardedBuffer<WarpLane> d_out(n);
  cudalab::poison(d_out);
  EXPECT_TRUE(cudalab::launch_error_reported([&] { warp_lane_2d(d_out.data(), kTooBigBlock); },
                                             "warp_lane_2d(d_out, " + dims(kTooBigBlock) + ")"));
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(d_out.guards_intact("the block image"));
  EXPECT_EQ(written(d_out.to_host()), 0u) << "warp_lane_2d wrote to the output in a launch that cannot run";
}

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
std::string image_name(const Image& s) { return "w" + std::to_string(s.width) + "_h" + std::to_string(s.height); }

// Runs one add_mirrored variant and checks it. Input and output each sit kLead elements into a guarded
// buffer (a pointer that is not an allocation's start), followed by a tail as long as the image plus
// 4096 elements; lead and tail are NaN (0xFF bytes). A read outside the image gives NaN, a write
// outside it shows up in the lead, the tail or a guard instead of faulting. Pixel values are integers
// in float, so every sum is exact. The input must come back unchanged.
constexpr std::size_t kLead = 3;

template <class Launch>
void check_add_mirrored(const Image& s, std::uint64_t seed, const std::string& what, Launch launch) {
  const int w = s.width, h = s.height;
  const std::size_t n = static_cast<std::size_t>(w) * h;
  const std::size_t tail = n + 4096;
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

  GuardedBuffer<float> d_in(kLead + n + tail), d_out(kLead + n + tail);
  cudalab::poison(d_in);  // 0xFF bytes: NaN
  cudalab::poison(d_out);
  if (n > 0) {
    CUDA_CHECK(cudaMemcpy(d_in.data() + kLead, in.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(d_out.data() + kLead, base.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  }
  const std::vector<float> in_before = d_in.to_host();
  launch(d_in.data() + kLead, d_out.data() + kLead);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> out = d_out.to_host();

  const std::vector<float> image(out.begin() + kLead, out.begin() + kLead + n);
  EXPECT_TRUE(AllEqual(expected, image, seed, Shape2D{static_cast<std::size_t>(h), static_cast<std::size_t>(w)}))
      << what << " on a " << w << " x " << h << " image (shown as [row y, col x]); an element still equal to "
      << "its old value was never written, one with twice the input added was written twice";
  std::size_t before = 0, after = 0, first_after = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (i >= kLead && i < kLead + n) continue;
    std::uint32_t bits;
    std::memcpy(&bits, &out[i], sizeof bits);
    if (bits == 0xFFFFFFFFu) continue;
    if (i < kLead) {
      ++before;
    } else if (after++ == 0) {
      first_after = i - kLead - n;
    }
  }
  EXPECT_EQ(before, 0u) << what << " wrote " << before << " elements just before the start of the " << w << " x "
                        << h << " image: check that no index can be negative";
  EXPECT_EQ(after, 0u) << what << " wrote " << after << " elements past the end of the " << w << " x " << h
                       << " image (the first at image end + " << first_after
                       << "): check the guard (x < width, y < height) and that x is the column";
  EXPECT_TRUE(d_out.guards_intact("the output image and its lead and tail"));
  EXPECT_TRUE(d_in.guards_intact("the input image and its lead and tail"));
  const std::vector<float> in_after = d_in.to_host();
  EXPECT_EQ(std::memcmp(in_before.data(), in_after.data(), in_before.size() * sizeof(float)), 0)
      << what << " changed its input: only the output may be written";
}

// Empty images (nothing to do, nothing written), one block exactly (32 x 8) and one short of it in both
// directions (31 x 7), one row or column, non-multiples of the block, x and y swapped, and large.
const std::vector<Image> kImages = {{0, 7},   {7, 0},   {1, 1},   {31, 7},    {32, 8},      {65, 9},
                                    {76, 62}, {62, 76}, {33, 17}, {17, 33},   {1, 500},     {500, 1},
                                    {64, 64}, {4097, 3}, {1000, 999}, {1920, 1080}};

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
                      StrideCase{{1000, 999}, dim3(5, 7), dim3(32, 4)},
                      StrideCase{{33, 17}, dim3(9, 5), dim3(32, 8)},      // grid larger than the image both ways
                      StrideCase{{1920, 1080}, dim3(132), dim3(256)},     // one row of blocks: all rows by stride
                      StrideCase{{0, 7}, dim3(2, 2), dim3(8, 8)},         // empty images: nothing to write
                      StrideCase{{7, 0}, dim3(2, 2), dim3(8, 8)}),
    [](const ::testing::TestParamInfo<StrideCase>& info) {
      return image_name(info.param.image) + "_grid" + std::to_string(info.param.grid.x) + "x" +
             std::to_string(info.param.grid.y) + "_block" + std::to_string(info.param.block.x) + "x" +
             std::to_string(info.param.block.y);
    });

class IndexingGridStrideLaunchCorrectness : public cudalab::GpuTest {};

// add_mirrored_grid_stride checks its launch: a block that cannot run throws, and nothing is written.
TEST_F(IndexingGridStrideLaunchCorrectness, ThrowsOnABadLaunch) {
  constexpr int kWidth = 100, kHeight = 40;
  const std::size_t n = static_cast<std::size_t>(kWidth) * kHeight;
  GuardedBuffer<float> d_in(std::vector<float>(n, 1.0f)), d_out(n);
  cudalab::poison(d_out);
  EXPECT_TRUE(cudalab::launch_error_reported(
      [&] { add_mirrored_grid_stride(d_in.data(), d_out.data(), kWidth, kHeight, dim3(2, 2), kTooBigBlock); },
      "add_mirrored_grid_stride(d_in, d_out, 100, 40, grid 2x2x1, block " + dims(kTooBigBlock) + ")"));
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(d_out.guards_intact("the output image"));
  EXPECT_EQ(written(d_out.to_host()), 0u) << "the output changed in a launch that cannot run";
}

class IndexingGridContractCorrectness : public cudalab::GpuTestWithParam<StrideCase> {};

// The contract: add_mirrored_grid_stride runs on exactly the grid and block it is given. A launch of its
// own grid (one thread per pixel) computes the right image too, so the test asks CUPTI which kernels the
// GPU ran during the call, and on what shape: whichever API launched them, each must have the given one.
TEST_P(IndexingGridContractCorrectness, LaunchesOnTheGivenGrid) {
  const StrideCase c = GetParam();
  const std::size_t n = static_cast<std::size_t>(c.image.width) * c.image.height;
  DeviceBuffer<float> d_in(std::vector<float>(n, 1.0f)), d_out(n);
  cudalab::KernelLaunchLog log;
  ASSERT_TRUE(log.error().empty()) << "the grader cannot see kernel launches here (" << log.error()
                                   << "): run the tests without a profiler or tool attached";
  add_mirrored_grid_stride(d_in.data(), d_out.data(), c.image.width, c.image.height, c.grid, c.block);
  const std::vector<cudalab::KernelLaunch> launches = log.launches();
  ASSERT_FALSE(launches.empty()) << "add_mirrored_grid_stride(" << c.image.width << " x " << c.image.height
                                 << " image, grid " << dims(c.grid) << ", block " << dims(c.block)
                                 << ") launched no kernel";
  for (const cudalab::KernelLaunch& k : launches) {
    const bool same_grid = k.grid.x == c.grid.x && k.grid.y == c.grid.y && k.grid.z == c.grid.z;
    const bool same_block = k.block.x == c.block.x && k.block.y == c.block.y && k.block.z == c.block.z;
    // The shapes first: a report's one-line summary keeps the first 100 characters.
    EXPECT_TRUE(same_grid && same_block)
        << "a kernel ran on grid " << dims(k.grid) << " (block " << dims(k.block) << "), not on the given grid "
        << dims(c.grid) << " (block " << dims(c.block) << "): add_mirrored_grid_stride launched "
        << k.name.substr(0, k.name.find('(')) << " for a " << c.image.width << " x " << c.image.height
        << " image; launch on exactly the grid and block you are given, and let the loop cover the rest";
  }
}
// Grids much smaller than the image, one of them a single block, and one 1D row of blocks.
INSTANTIATE_TEST_SUITE_P(, IndexingGridContractCorrectness,
                         ::testing::Values(StrideCase{{1000, 999}, dim3(1, 1), dim3(32, 8)},
                                           StrideCase{{76, 62}, dim3(2, 3), dim3(16, 16)},
                                           StrideCase{{1920, 1080}, dim3(132), dim3(256)}),
                         [](const ::testing::TestParamInfo<StrideCase>& info) {
                           return image_name(info.param.image) + "_grid" + std::to_string(info.param.grid.x) +
                                  "x" + std::to_string(info.param.grid.y);
                         });

}  // namespace
