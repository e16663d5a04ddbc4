// Lab 07 tests. Correctness tests judge; perf tests only measure (the grader scores speed).
#include <gtest/gtest.h>

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
#include <string>
#include <vector>

#include <cudalab/bench.cuh>
#include <cudalab/check.cuh>
#include <cudalab/compare.hpp>
#include <cudalab/device_buffer.cuh>
#include <cudalab/device_compare.cuh>
#include <cudalab/device_random.cuh>
#include <cudalab/gtest_cuda.hpp>
#include <cudalab/random.hpp>

#include "scan.cuh"

namespace {

using cudalab::AllEqual;
using cudalab::DeviceBuffer;

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

// Runs scan(d_in, d_out) once on fresh buffers with a poisoned output, then checks the output and
// that the input is unchanged. Random data differs from tile to tile, so a race between threads
// (a missing __syncthreads) changes some result in practically every one of the many tiles.
void expect_scan(std::size_t n, std::uint64_t seed, Kind kind, std::size_t segment,
                 const std::function<void(const int*, int*)>& scan) {
  DeviceBuffer<int> d_in = make_input(n, seed), d_out(n);
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
}

// Scratch for the whole-array scans, poisoned: the functions may not rely on its contents.
DeviceBuffer<unsigned char> make_scratch(std::size_t bytes) {
  DeviceBuffer<unsigned char> d_temp(std::max<std::size_t>(bytes, 1));
  cudalab::poison(d_temp);
  return d_temp;
}

// 1; around a warp; around a 1024-element tile; a few tiles; the largest size of small mode; many
// tiles (more than one level of tile totals for any tile of 1024 to 4096 items); 2^24 + 3.
const std::vector<std::size_t> kSizes = {1,    31,    32,        33,    1023, 1024, 1025,
                                         4097, 65535, (1u << 20) + 7, (1u << 24) + 3};
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

TEST_P(ScanCorrectness, Exclusive) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  auto d_temp = make_scratch(scan_temp_bytes(n));
  expect_scan(n, kSeed + 4 * n, Kind::kExclusive, n,
              [&](const int* d_in, int* d_out) { exclusive_scan(d_in, d_out, n, d_temp.data()); });
}

TEST_P(ScanCorrectness, Inclusive) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  auto d_temp = make_scratch(scan_temp_bytes(n));
  expect_scan(n, kSeed + 5 * n, Kind::kInclusive, n,
              [&](const int* d_in, int* d_out) { inclusive_scan(d_in, d_out, n, d_temp.data()); });
}
INSTANTIATE_TEST_SUITE_P(, ScanCorrectness, ::testing::ValuesIn(any_n_sizes()), cudalab::SizeName());

// --- Challenge: single pass with decoupled look-back ---------------------------------------------

class ScanDecoupledCorrectness : public cudalab::GpuTestWithParam<std::size_t> {};

TEST_P(ScanDecoupledCorrectness, Exclusive) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  auto d_temp = make_scratch(scan_decoupled_temp_bytes(n));
  expect_scan(n, kSeed + 6 * n, Kind::kExclusive, n,
              [&](const int* d_in, int* d_out) { exclusive_scan_decoupled(d_in, d_out, n, d_temp.data()); });
}

TEST_P(ScanDecoupledCorrectness, Inclusive) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  auto d_temp = make_scratch(scan_decoupled_temp_bytes(n));
  expect_scan(n, kSeed + 7 * n, Kind::kInclusive, n,
              [&](const int* d_in, int* d_out) { inclusive_scan_decoupled(d_in, d_out, n, d_temp.data()); });
}
INSTANTIATE_TEST_SUITE_P(, ScanDecoupledCorrectness, ::testing::ValuesIn(any_n_sizes()), cudalab::SizeName());

class ScanDecoupledReuseCorrectness : public cudalab::GpuTest {};

// The tile counter and the status words left by one call must not leak into the next: the same
// scratch serves five calls in a row, alternating exclusive and inclusive, on different data.
TEST_F(ScanDecoupledReuseCorrectness, FiveCallsOneScratch) {
  const std::size_t n = (std::size_t{1} << 18) + 11;
  CUDALAB_SKIP_IF_LARGE(n);
  auto d_temp = make_scratch(scan_decoupled_temp_bytes(n));
  for (int call = 0; call < 5; ++call) {
    const Kind kind = call % 2 == 0 ? Kind::kExclusive : Kind::kInclusive;
    expect_scan(n, kSeed + 100 + call, kind, n, [&](const int* d_in, int* d_out) {
      if (kind == Kind::kExclusive) {
        exclusive_scan_decoupled(d_in, d_out, n, d_temp.data());
      } else {
        inclusive_scan_decoupled(d_in, d_out, n, d_temp.data());
      }
    });
    if (HasFailure()) {
      ADD_FAILURE() << "call " << call + 1 << " of 5 with the same scratch went wrong";
      break;
    }
  }
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
