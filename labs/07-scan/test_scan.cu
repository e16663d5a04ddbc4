// Lab 07 tests. Correctness tests judge; perf tests only measure (the grader scores speed).
#include <gtest/gtest.h>

#include <cuda.h>  // the driver API's types for AliasedInput (its functions come through cudart)
#include <cub/device/device_scan.cuh>
#include <thrust/equal.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/inner_product.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/scan.h>
#include <thrust/transform.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <cudalab/bench.cuh>
#include <cudalab/check.cuh>
#include <cudalab/compare.hpp>
#include <cudalab/device_buffer.cuh>
#include <cudalab/device_compare.cuh>
#include <cudalab/device_random.cuh>
#include <cudalab/gtest_cuda.hpp>
#include <cudalab/guarded_buffer.cuh>
#include <cudalab/launch.cuh>
#include <cudalab/random.hpp>

#include "scan.cuh"

namespace {

using cudalab::AllEqual;
using cudalab::DeviceBuffer;
using cudalab::GuardedBuffer;

constexpr std::uint64_t kSeed = 7007;

// Values 1..7: never zero (a zero hides an element that was skipped) and small enough that the sum
// of 2^28 + 5 of them stays below 2^31 (7 * (2^28 + 5) < 2147483647), so int32 results are exact.
// Made on the GPU (on the host, 2^28 values take seconds): element i is random_vector<int>(n, seed,
// 1, 7)'s element i, so a seed in a failure message still reproduces the input on the host.
DeviceBuffer<int> make_input(std::size_t n, std::uint64_t seed) {
  DeviceBuffer<int> d_in(n);
  cudalab::random_fill(d_in.data(), n, seed, 1, 7);
  return d_in;
}

enum class Kind { kInclusive, kExclusive };

// Index i -> the number of its segment: the keys of the segmented reference scan.
struct SegmentOf {
  std::size_t segment;
  __host__ __device__ std::size_t operator()(std::size_t i) const { return i / segment; }
};

// The trusted reference, computed by thrust on the GPU (a serial host pass over 2^28 + 5 ints takes
// seconds), restarting the running sum at every multiple of `segment` (the block scans of Tasks 1-3
// scan each tile on its own; a whole-array scan has one segment).
DeviceBuffer<int> reference_scan(const DeviceBuffer<int>& d_in, Kind kind, std::size_t segment) {
  const std::size_t n = d_in.size();
  DeviceBuffer<int> d_expected(n);
  const int* first = d_in.data();
  if (segment >= n) {
    if (kind == Kind::kExclusive) {
      thrust::exclusive_scan(thrust::device, first, first + n, d_expected.data(), 0);
    } else {
      thrust::inclusive_scan(thrust::device, first, first + n, d_expected.data());
    }
  } else {
    const auto keys = thrust::make_transform_iterator(thrust::counting_iterator<std::size_t>(0), SegmentOf{segment});
    if (kind == Kind::kExclusive) {
      thrust::exclusive_scan_by_key(thrust::device, keys, keys + n, first, d_expected.data(), 0);
    } else {
      thrust::inclusive_scan_by_key(thrust::device, keys, keys + n, first, d_expected.data());
    }
  }
  CUDA_CHECK(cudaDeviceSynchronize());
  return d_expected;
}

// Runs scan(d_in, d_out) once with a poisoned output, then checks the output, that the input is
// unchanged, and that nothing was written outside the output, the input or the scratch (when there is
// one): each is a GuardedBuffer, whose guard zones catch a stray write with or without the sanitizer
// (and whose junk spoils a read past the end). Random data differs from tile to tile, so a race
// between threads (a missing __syncthreads) changes some result in practically every one of the many
// tiles.
void expect_scan(std::size_t n, std::uint64_t seed, Kind kind, std::size_t segment,
                 const std::function<void(const int*, int*)>& scan, GuardedBuffer<unsigned char>* scratch = nullptr) {
  GuardedBuffer<int> d_in(n), d_out(n);
  cudalab::random_fill(d_in.data(), n, seed, 1, 7);  // the same values as make_input(n, seed)
  cudalab::poison(d_out);
  CUDA_CHECK(cudaDeviceSynchronize());  // input and poison in place, whatever stream the scan uses
  scan(d_in.data(), d_out.data());
  CUDA_CHECK(cudaDeviceSynchronize());
  // A second copy of the input, and the reference from it, made only after the scan under test has
  // finished: no stray write of that scan can reach them.
  const DeviceBuffer<int> d_original = make_input(n, seed);
  EXPECT_TRUE(cudalab::DeviceAllEqual(reference_scan(d_original, kind, segment), d_out, seed))
      << (kind == Kind::kInclusive ? "inclusive" : "exclusive") << " scan of n = " << n
      << (segment < n ? " in independent tiles of " + std::to_string(segment) : std::string());
  EXPECT_TRUE(cudalab::DeviceAllEqual(d_original, d_in, seed)) << "the scan must not modify its input";
  EXPECT_TRUE(d_out.guards_intact("the output")) << "n = " << n;
  EXPECT_TRUE(d_in.guards_intact("the input")) << "n = " << n;
  if (scratch != nullptr) {
    EXPECT_TRUE(scratch->guards_intact("the scratch (d_temp)"))
        << "n = " << n << ": the scan used more scratch than its *_temp_bytes(n) = " << scratch->size()
        << " bytes reserved";
  }
}

// Scratch for the perf tests, poisoned: the functions may not rely on its contents.
DeviceBuffer<unsigned char> make_scratch(std::size_t bytes) {
  DeviceBuffer<unsigned char> d_temp(std::max<std::size_t>(bytes, 1));
  cudalab::poison(d_temp);
  return d_temp;
}

// 0 (nothing to do: no launch, nothing written); 1; around a warp; around a 1024-element tile; whole
// tiles of 2048, 4096 and 8192 items (an any-n scan of exactly one tile of its own size takes the
// one-tile path; 2^24 is exactly 4096 tiles of 4096, so its tile totals are exactly one such tile);
// 20483 (6 tiles of 4096: tile totals that are not a multiple of 4 exercise 16-byte alignment in the
// scratch, in small mode too); the largest sizes of small mode; many tiles (more than one level of tile
// totals for any tile of 1024 to 4096 items); 2^24 + 3.
const std::vector<std::size_t> kSizes = {0,     1,     31,    32,    33,    1023,           1024,     1025,
                                         2048,  4096,  4097,  8192,  20483, 65535,          65536,    (1u << 20) + 7,
                                         1u << 24,    (1u << 24) + 3};
// The whole-array scans also run on more than 2^28 items.
std::vector<std::size_t> any_n_sizes() {
  std::vector<std::size_t> sizes = kSizes;
  sizes.push_back((std::size_t{1} << 28) + 5);
  return sizes;
}
// --- Tasks 1-3: block scans, each tile of kBlockScanTile on its own --------------------------------

class BlockScanCorrectness : public cudalab::GpuTestWithParam<std::size_t> {};

TEST_P(BlockScanCorrectness, HillisSteele) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  expect_scan(n, kSeed + n, Kind::kInclusive, kBlockScanTile,
              [n](const int* d_in, int* d_out) { block_scan_hillis_steele(d_in, d_out, n); });
}

TEST_P(BlockScanCorrectness, Blelloch) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  expect_scan(n, kSeed + 2 * n, Kind::kExclusive, kBlockScanTile,
              [n](const int* d_in, int* d_out) { block_scan_blelloch(d_in, d_out, n); });
}

TEST_P(BlockScanCorrectness, WarpShuffle) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  expect_scan(n, kSeed + 3 * n, Kind::kInclusive, kBlockScanTile,
              [n](const int* d_in, int* d_out) { block_scan_warp_shuffle(d_in, d_out, n); });
}
INSTANTIATE_TEST_SUITE_P(, BlockScanCorrectness, ::testing::ValuesIn(kSizes), cudalab::SizeName());

// --- Task 4: any n, scan-then-propagate ----------------------------------------------------------

class ScanCorrectness : public cudalab::GpuTestWithParam<std::size_t> {};

// The scratch is exactly the bytes the *_temp_bytes function asked for, poisoned, between guard zones:
// a scan that uses more than it reserved fails even where the write lands in memory nobody owns.
TEST_P(ScanCorrectness, Exclusive) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  GuardedBuffer<unsigned char> d_temp(scan_temp_bytes(n));
  cudalab::poison(d_temp);
  expect_scan(
      n, kSeed + 4 * n, Kind::kExclusive, n,
      [&](const int* d_in, int* d_out) { exclusive_scan(d_in, d_out, n, d_temp.data()); }, &d_temp);
}

TEST_P(ScanCorrectness, Inclusive) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  GuardedBuffer<unsigned char> d_temp(scan_temp_bytes(n));
  cudalab::poison(d_temp);
  expect_scan(
      n, kSeed + 5 * n, Kind::kInclusive, n,
      [&](const int* d_in, int* d_out) { inclusive_scan(d_in, d_out, n, d_temp.data()); }, &d_temp);
}
INSTANTIATE_TEST_SUITE_P(, ScanCorrectness, ::testing::ValuesIn(any_n_sizes()), cudalab::SizeName());

// --- Challenge: single pass with decoupled look-back ---------------------------------------------

class ScanDecoupledCorrectness : public cudalab::GpuTestWithParam<std::size_t> {};

TEST_P(ScanDecoupledCorrectness, Exclusive) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  GuardedBuffer<unsigned char> d_temp(scan_decoupled_temp_bytes(n));
  cudalab::poison(d_temp);
  expect_scan(
      n, kSeed + 6 * n, Kind::kExclusive, n,
      [&](const int* d_in, int* d_out) { exclusive_scan_decoupled(d_in, d_out, n, d_temp.data()); }, &d_temp);
}

TEST_P(ScanDecoupledCorrectness, Inclusive) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  GuardedBuffer<unsigned char> d_temp(scan_decoupled_temp_bytes(n));
  cudalab::poison(d_temp);
  expect_scan(
      n, kSeed + 7 * n, Kind::kInclusive, n,
      [&](const int* d_in, int* d_out) { inclusive_scan_decoupled(d_in, d_out, n, d_temp.data()); }, &d_temp);
}
INSTANTIATE_TEST_SUITE_P(, ScanDecoupledCorrectness, ::testing::ValuesIn(any_n_sizes()), cudalab::SizeName());

class ScanDecoupledReuseCorrectness : public cudalab::GpuTest {};

// The tile counter and the status words left by one call must not leak into the next: the same
// scratch serves five calls in a row, alternating exclusive and inclusive, on different data.
TEST_F(ScanDecoupledReuseCorrectness, FiveCallsOneScratch) {
  const std::size_t n = (std::size_t{1} << 18) + 11;
  CUDALAB_SKIP_IF_LARGE(n);
  GuardedBuffer<unsigned char> d_temp(scan_decoupled_temp_bytes(n));
  cudalab::poison(d_temp);
  for (int call = 0; call < 5; ++call) {
    const Kind kind = call % 2 == 0 ? Kind::kExclusive : Kind::kInclusive;
    expect_scan(
        n, kSeed + 100 + call, kind, n,
        [&](const int* d_in, int* d_out) {
          if (kind == Kind::kExclusive) {
            exclusive_scan_decoupled(d_in, d_out, n, d_temp.data());
          } else {
            inclusive_scan_decoupled(d_in, d_out, n, d_temp.data());
          }
        },
        &d_temp);
    if (HasFailure()) {
      ADD_FAILURE() << "call " << call + 1 << " of 5 with the same scratch went wrong";
      break;
    }
  }
}

// --- Above 2^32 items: 64-bit indexing --------------------------------------------------------------

// n is a size_t: a tile's first index computed in 32 bits (blockIdx.x * tile_size) wraps around once
// the array has 2^32 items or more. Holding that many ints twice (input and output) takes 32 GiB, more
// than a test binary may take of a shared GPU, so the input repeats one physical chunk: the driver's
// virtual memory management maps the same kAliasChunkBytes of device memory again and again into one
// range of addresses. The kernels see an ordinary read-only array of n ints whose values repeat every
// kAliasChunkBytes / 4 items (the contract's cudaMalloc'd pointers are 256-byte aligned; these are
// 2 MiB aligned). Only the output is real memory: 16 GiB.
constexpr std::size_t kHugeScanItems = (std::size_t{1} << 32) + 12345;
constexpr std::size_t kAliasChunkBytes = std::size_t{256} << 20;

// A driver API function, found through the CUDA runtime (the test binaries do not link libcuda, so
// that they start on a machine without a driver).
template <class Fn>
Fn driver_function(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
    throw std::runtime_error(std::string("the CUDA driver has no ") + name);
  }
  return reinterpret_cast<Fn>(fn);
}

void driver_check(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS) throw std::runtime_error(std::string(what) + " failed with CUresult " + std::to_string(result));
}

class AliasedInput {
 public:
  explicit AliasedInput(std::size_t count) {
    CUDA_CHECK(cudaFree(nullptr));  // the runtime's context is current: the driver calls below use it
    int device = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = device;
    std::size_t granularity = 0;
    driver_check(driver_function<decltype(&cuMemGetAllocationGranularity)>("cuMemGetAllocationGranularity")(
                     &granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                 "cuMemGetAllocationGranularity");
    chunk_ = cudalab::ceil_div(kAliasChunkBytes, granularity) * granularity;
    range_ = cudalab::ceil_div(count * sizeof(int), chunk_) * chunk_;
    driver_check(driver_function<decltype(&cuMemCreate)>("cuMemCreate")(&handle_, chunk_, &prop, 0), "cuMemCreate");
    created_ = true;
    driver_check(driver_function<decltype(&cuMemAddressReserve)>("cuMemAddressReserve")(&base_, range_, chunk_, 0, 0),
                 "cuMemAddressReserve");
    auto map = driver_function<decltype(&cuMemMap)>("cuMemMap");
    for (std::size_t offset = 0; offset < range_; offset += chunk_) {
      driver_check(map(base_ + offset, chunk_, 0, handle_, 0), "cuMemMap");
      mapped_ = offset + chunk_;
    }
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    driver_check(driver_function<decltype(&cuMemSetAccess)>("cuMemSetAccess")(base_, range_, &access, 1),
                 "cuMemSetAccess");
  }
  AliasedInput(const AliasedInput&) = delete;
  AliasedInput& operator=(const AliasedInput&) = delete;
  ~AliasedInput() {  // never throws
    cudaDeviceSynchronize();
    if (mapped_ > 0) driver_function<decltype(&cuMemUnmap)>("cuMemUnmap")(base_, mapped_);
    if (base_ != 0) driver_function<decltype(&cuMemAddressFree)>("cuMemAddressFree")(base_, range_);
    if (created_) driver_function<decltype(&cuMemRelease)>("cuMemRelease")(handle_);
  }

  int* data() const { return reinterpret_cast<int*>(base_); }
  std::size_t chunk_items() const { return chunk_ / sizeof(int); }  // the period of the values

 private:
  CUdeviceptr base_ = 0;
  std::size_t chunk_ = 0, range_ = 0, mapped_ = 0;
  CUmemGenericAllocationHandle handle_{};
  bool created_ = false;
};

// 1 with probability 1/8, else 0: the sum of 2^32 + 12345 of them stays far below 2^31 (about 2^29), so
// no scan overflows int32.
struct SparseOne {
  __host__ __device__ int operator()(int v) const { return v == 7 ? 1 : 0; }
};

// Counts the items where out is not the scan of in, and finds the first: out is an inclusive scan
// exactly when out[0] = in[0] and out[i] = out[i - 1] + in[i] (exclusive: out[0] = 0 and
// out[i] = out[i - 1] + in[i - 1]), so no reference array is needed. Unsigned arithmetic: a wrong
// out[i - 1] (the poison) must not overflow a signed int.
__global__ void count_scan_errors(const int* in, const int* out, std::size_t n, bool inclusive,
                                  unsigned long long* errors, unsigned long long* first) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const unsigned before = i == 0 ? 0u : static_cast<unsigned>(out[i - 1]);
    const unsigned add = inclusive ? static_cast<unsigned>(in[i]) : (i == 0 ? 0u : static_cast<unsigned>(in[i - 1]));
    if (static_cast<unsigned>(out[i]) != before + add) {
      atomicAdd(errors, 1ull);
      atomicMin(first, static_cast<unsigned long long>(i));
    }
  }
}

// Scans kHugeScanItems ints (a repeating input, see AliasedInput) and checks every output item on the
// GPU, and the guards around the output and the scratch.
void expect_huge_scan(Kind kind, std::size_t temp_bytes, const std::function<void(const int*, int*, void*)>& scan) {
  const std::size_t n = kHugeScanItems;
  CUDALAB_SKIP_UNLESS_GPU_MEMORY(n * sizeof(int) + kAliasChunkBytes + temp_bytes);
  AliasedInput d_in(n);
  cudalab::random_fill(d_in.data(), d_in.chunk_items(), kSeed + 13, 1, 7);  // the chunk, through its first mapping
  thrust::transform(thrust::device, d_in.data(), d_in.data() + d_in.chunk_items(), d_in.data(), SparseOne{});
  GuardedBuffer<int> d_out(n);
  cudalab::poison(d_out);
  GuardedBuffer<unsigned char> d_temp(temp_bytes);
  cudalab::poison(d_temp);
  CUDA_CHECK(cudaDeviceSynchronize());
  scan(d_in.data(), d_out.data(), d_temp.data());
  CUDA_CHECK(cudaDeviceSynchronize());

  DeviceBuffer<unsigned long long> d_errors(std::vector<unsigned long long>{0, ~0ull});
  count_scan_errors<<<4096, 256>>>(d_in.data(), d_out.data(), n, kind == Kind::kInclusive, d_errors.data(),
                                   d_errors.data() + 1);
  CUDA_CHECK_LAST();
  const std::vector<unsigned long long> errors = d_errors.to_host();
  // A first wrong item past 2^32 points at a 32-bit index; one below it most often fails at smaller n too.
  const bool past_2_32 = errors[0] != 0 && errors[1] >= (1ull << 32);
  EXPECT_EQ(errors[0], 0u) << (kind == Kind::kInclusive ? "inclusive" : "exclusive") << " scan of n = " << n
                           << " (more than 2^32 items): " << errors[0] << " item(s) wrong, the first at index "
                           << errors[1] << " (item 2^32 is index 4294967296). "
                           << (past_2_32 ? "Everything before item 2^32 is right: do your kernels compute "
                                           "indices in 64 bits (std::size_t) everywhere?"
                                         : "The first wrong item is below 2^32: if smaller tests of this task "
                                           "fail too, fix those first; if only this one fails, an index that "
                                           "wraps at 2^32 can land on an early item.");
  EXPECT_TRUE(d_out.guards_intact("the output")) << "n = " << n;
  EXPECT_TRUE(d_temp.guards_intact("the scratch (d_temp)")) << "n = " << n;
}

class ScanHugeCorrectness : public cudalab::GpuTest {};

TEST_F(ScanHugeCorrectness, Propagate) {
  CUDALAB_SKIP_IF_LARGE(kHugeScanItems);
  expect_huge_scan(Kind::kInclusive, scan_temp_bytes(kHugeScanItems), [](const int* d_in, int* d_out, void* d_temp) {
    inclusive_scan(d_in, d_out, kHugeScanItems, d_temp);
  });
}

TEST_F(ScanHugeCorrectness, Decoupled) {
  CUDALAB_SKIP_IF_LARGE(kHugeScanItems);
  expect_huge_scan(Kind::kExclusive, scan_decoupled_temp_bytes(kHugeScanItems),
                   [](const int* d_in, int* d_out, void* d_temp) {
                     exclusive_scan_decoupled(d_in, d_out, kHugeScanItems, d_temp);
                   });
}

// --- Perf ----------------------------------------------------------------------------------------

std::string size_label(std::size_t n) {
  for (int k = 0; k < 63; ++k) {
    if (n == (std::size_t{1} << k)) return "N = 2^" + std::to_string(k) + " int32";
  }
  return "N = " + std::to_string(n) + " int32";
}

// 1 where actual != sign * expected: summed over the output, the wrong elements of a scan of the input
// times sign.
struct WrongTimes {
  int sign;
  __host__ __device__ std::size_t operator()(int actual, int expected) const { return actual != sign * expected; }
};

// Buffers for the whole-array perf tests, and a check of any one scan function on them. The input,
// the reference and the check all stay on the GPU: at 2^28 ints the host versions took seconds.
struct PerfSetup {
  std::size_t n;
  DeviceBuffer<int> d_in, d_out;
  DeviceBuffer<int> d_expected;  // exclusive scan of the input as made (sign 1)
  int sign = 1;                  // the input is sign * the input as made: next_input() flips it
  DeviceBuffer<unsigned char> d_temp, d_temp_decoupled, d_temp_cub;
  std::size_t cub_bytes = 0;

  explicit PerfSetup(std::size_t count) : n(count) {
    d_in = make_input(n, kSeed + 11);
    d_expected = reference_scan(d_in, Kind::kExclusive, n);
    d_out = DeviceBuffer<int>(n);
    d_temp = make_scratch(scan_temp_bytes(n));
    d_temp_decoupled = make_scratch(scan_decoupled_temp_bytes(n));
    CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, cub_bytes, d_in.data(), d_out.data(), static_cast<int>(n)));
    d_temp_cub = DeviceBuffer<unsigned char>(std::max<std::size_t>(cub_bytes, 1));
  }
  bool correct(const std::function<void()>& scan) {
    cudalab::poison(d_out);
    CUDA_CHECK(cudaDeviceSynchronize());
    scan();
    CUDA_CHECK(cudaDeviceSynchronize());
    return output_is_scan();
  }
  // Untimed, before each timed call of the function under test: the input negated in place, so the
  // right output is the old one negated (exact: every |sum| < 2^31), never the last call's; the output
  // poisoned. Synchronized, whatever stream the scan uses.
  void next_input() {
    thrust::transform(thrust::device, d_in.data(), d_in.data() + n, d_in.data(), thrust::negate<int>());
    sign = -sign;
    cudalab::poison(d_out);
    CUDA_CHECK(cudaDeviceSynchronize());
  }
  // Every element of the output is the exclusive scan of the current input. One counting pass: at 2^28
  // thrust::equal (2^20 items a step, a sync each) took 12 ms.
  bool output_is_scan() const {
    return thrust::inner_product(thrust::device, d_out.data(), d_out.data() + n, d_expected.data(), std::size_t{0},
                                 thrust::plus<std::size_t>(), WrongTimes{sign}) == 0;
  }
  void propagate() { exclusive_scan(d_in.data(), d_out.data(), n, d_temp.data()); }
  void decoupled() { exclusive_scan_decoupled(d_in.data(), d_out.data(), n, d_temp_decoupled.data()); }
  void library() {
    CUDA_CHECK(cub::DeviceScan::ExclusiveSum(d_temp_cub.data(), cub_bytes, d_in.data(), d_out.data(),
                                             static_cast<int>(n)));
  }
};

class ScanPerf : public cudalab::GpuTestWithParam<std::size_t> {};

// GB/s = 8 N / t (every int read once and written once), against cub::DeviceScan::ExclusiveSum.
TEST_P(ScanPerf, Propagate) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  PerfSetup s(GetParam());
  if (!s.correct([&] { s.propagate(); })) CUDALAB_SKIP("exclusive_scan is incorrect at this size: not timed");
  const bool decoupled_ok = s.correct([&] { s.decoupled(); });

  cudalab::bench::Suite suite(cudalab::bench::Work::bytes(8.0 * s.n), size_label(s.n));
  suite.add("impl", [&] { s.propagate(); })
      .prepare([&](int) { s.next_input(); })
      .verify([&](int) { return s.output_is_scan(); });
  suite.add("cub", [&] { s.library(); });
  if (decoupled_ok) suite.add("decoupled", [&] { s.decoupled(); });
  suite.baseline("cub").floor_ms(cudalab::bench::copy_floor_ms(8.0 * s.n));
  suite.run();
  suite.record();
}

TEST_P(ScanPerf, DecoupledLookBack) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  PerfSetup s(GetParam());
  if (!s.correct([&] { s.decoupled(); })) {
    CUDALAB_SKIP("exclusive_scan_decoupled is incorrect at this size: not timed");
  }
  const bool propagate_ok = s.correct([&] { s.propagate(); });

  cudalab::bench::Suite suite(cudalab::bench::Work::bytes(8.0 * s.n), size_label(s.n));
  suite.add("impl", [&] { s.decoupled(); })
      .prepare([&](int) { s.next_input(); })
      .verify([&](int) { return s.output_is_scan(); });
  suite.add("cub", [&] { s.library(); });
  if (propagate_ok) suite.add("propagate", [&] { s.propagate(); });
  suite.baseline("cub").floor_ms(cudalab::bench::copy_floor_ms(8.0 * s.n));
  suite.run();
  suite.record();
}
INSTANTIATE_TEST_SUITE_P(, ScanPerf, ::testing::Values(std::size_t{1} << 24, std::size_t{1} << 28),
                         cudalab::SizeName());

class ScanBlockPerf : public cudalab::GpuTest {};

// The three block scans side by side on 2^24 ints (each 1024-element tile scanned on its own), in
// the same 8 N bytes per call. Informational: it shows what the algorithms cost, not a grade.
TEST_F(ScanBlockPerf, BlockScans) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  const std::size_t n = std::size_t{1} << 24;
  // Input, references and checks on the GPU, as in PerfSetup.
  const DeviceBuffer<int> d_in = make_input(n, kSeed + 12);
  const DeviceBuffer<int> d_inclusive = reference_scan(d_in, Kind::kInclusive, kBlockScanTile);
  const DeviceBuffer<int> d_exclusive = reference_scan(d_in, Kind::kExclusive, kBlockScanTile);
  DeviceBuffer<int> d_out(n);
  auto correct = [&](const DeviceBuffer<int>& d_expected, const std::function<void()>& scan) {
    cudalab::poison(d_out);
    CUDA_CHECK(cudaDeviceSynchronize());
    scan();
    CUDA_CHECK(cudaDeviceSynchronize());
    return thrust::equal(thrust::device, d_out.data(), d_out.data() + n, d_expected.data());
  };
  auto shuffle = [&] { block_scan_warp_shuffle(d_in.data(), d_out.data(), n); };
  auto hillis_steele = [&] { block_scan_hillis_steele(d_in.data(), d_out.data(), n); };
  auto blelloch = [&] { block_scan_blelloch(d_in.data(), d_out.data(), n); };
  if (!correct(d_inclusive, shuffle)) CUDALAB_SKIP("block_scan_warp_shuffle is incorrect: not timed");

  cudalab::bench::Suite suite(cudalab::bench::Work::bytes(8.0 * n), "N = 2^24 int32, tiles of 1024");
  suite.add("impl", shuffle);
  if (correct(d_inclusive, hillis_steele)) suite.add("hillis_steele", hillis_steele);
  if (correct(d_exclusive, blelloch)) suite.add("blelloch", blelloch);
  suite.floor_ms(cudalab::bench::copy_floor_ms(8.0 * n));
  suite.run();
  suite.record();
}

}  // namespace
