// Lab 10 tests. Correctness tests judge; perf tests only measure (the grader scores speed).
#include <gtest/gtest.h>

#include <cooperative_groups.h>
#include <cub/device/device_reduce.cuh>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/transform.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <cudalab/bench.cuh>
#include <cudalab/check.cuh>
#include <cudalab/compare.hpp>
#include <cudalab/device_buffer.cuh>
#include <cudalab/gtest_cuda.hpp>
#include <cudalab/guarded_buffer.cuh>
#include <cudalab/launch.cuh>
#include <cudalab/random.hpp>
#include <cudalab/scribble.cuh>

#include "cooperative.cuh"

namespace cg = cooperative_groups;

// Kernels the tests launch themselves, to probe cooperative_grid_blocks with known resource needs.
// They are outside the anonymous namespace only so that their names read well in a profiler.
__global__ void probe_light_kernel(int* p) {
  if (p != nullptr) p[threadIdx.x] = 1;
}
// 40 KiB of static shared memory per block: at most 5 blocks fit in the 228 KiB of an H100/H200 SM.
__global__ void probe_heavy_kernel(int* p) {
  __shared__ int s_scratch[10 * 1024];
  s_scratch[threadIdx.x] = threadIdx.x;
  __syncthreads();
  if (p != nullptr) p[threadIdx.x] = s_scratch[(threadIdx.x + 1) % blockDim.x];
}
// Every block checks in, the grid meets once, and block 0 reads how many blocks checked in.
__global__ void probe_grid_sync_kernel(unsigned int* arrived, unsigned int* seen) {
  const cg::grid_group grid = cg::this_grid();
  if (threadIdx.x == 0) atomicAdd(arrived, 1u);
  grid.sync();
  if (blockIdx.x == 0 && threadIdx.x == 0) *seen = atomicAdd(arrived, 0u);
}
// `rounds` grid-wide barriers and nothing else: its time divided by rounds is the cost of one.
__global__ void sync_loop_kernel(int rounds) {
  const cg::grid_group grid = cg::this_grid();
  for (int r = 0; r < rounds; ++r) grid.sync();
}

namespace {

using cudalab::AllEqual;
using cudalab::AllNear;
using cudalab::DeviceBuffer;
using cudalab::GuardedBuffer;

constexpr std::uint64_t kSeed = 1010;
constexpr int kGroup = 32;  // values per tile / vote group

// Sizes that are not multiples of 32 (and some that are), many blocks, and a large size.
const std::vector<std::size_t> kSizes = {1, 31, 32, 33, 255, 257, 1000, 50001, (1u << 20) + 3, (1u << 24) + 5};

// The same sizes and n = 0 (tasks 1-3 accept an empty input: nothing may be launched or written).
std::vector<std::size_t> with_zero(std::vector<std::size_t> sizes) {
  sizes.insert(sizes.begin(), 0);
  return sizes;
}

std::size_t groups(std::size_t n) { return cudalab::ceil_div<std::size_t>(n, kGroup); }

// Leaves a NaN in every word of shared memory on every SM, so a block that reads a shared slot it never
// wrote (a missing barrier, a slot past the end of its array) adds a NaN instead of a leftover that may
// happen to be right. Kernels of the lab do not clear their shared memory; this makes sure of it.
void scribble_shared_memory() { cudalab::scribble_shared_memory({0xFFFFFFFFu, 0, true}); }  // a float NaN

// A partials buffer as the contract sizes it, guarded, every slot a NaN: a block that reads a partial
// before its block stored it (no grid-wide barrier) gets a NaN, not a value left by an earlier call.
struct Partials {
  GuardedBuffer<float> buffer{coop_partials_capacity()};
  float* poisoned() {
    cudalab::poison(buffer);
    return buffer.data();
  }
};

// Summing positive floats where no value goes through more than d roundings: relative error at most
// d*u / (1 - d*u), u = 2^-24 (Higham, section 4.2). d = tree depth + 64 serial adds per thread.
double relative_tolerance(std::size_t n) {
  const double d = std::ceil(std::log2(static_cast<double>(std::max<std::size_t>(n, 2)))) + 64.0;
  const double u = 0x1p-24;
  return d * u / (1.0 - d * u);
}

// --- Task 1: tile sums -----------------------------------------------------------------------------

class CoopTileCorrectness : public cudalab::GpuTestWithParam<std::size_t> {};

// Input and output are guarded: a lane that reads past the end adds junk, a write past the last tile
// sum (or before the first) changes a guard.
TEST_P(CoopTileCorrectness, TileSums) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  const std::uint64_t seed = kSeed + n;
  const auto h_in = cudalab::random_vector<int>(n, seed, 1, 1000);
  std::vector<int> expected(groups(n), 0);
  for (std::size_t i = 0; i < n; ++i) expected[i / kGroup] += h_in[i];
  GuardedBuffer<int> d_in(h_in), d_out(groups(n));
  cudalab::poison(d_out);
  tile_sums(d_in.data(), d_out.data(), n);
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(AllEqual(expected, d_out.to_host(), seed)) << "one sum per 32 values, n = " << n;
  EXPECT_TRUE(d_out.guards_intact("the tile sums"));
  EXPECT_TRUE(d_in.guards_intact("the input (read only)"));
}
INSTANTIATE_TEST_SUITE_P(, CoopTileCorrectness, ::testing::ValuesIn(with_zero(kSizes)), cudalab::SizeName());

// --- Task 2: block sums ----------------------------------------------------------------------------

class CoopBlockCorrectness : public cudalab::GpuTestWithParam<std::size_t> {};

// Shared memory holds NaNs before the call: reading a tile sum that is not stored yet (a missing
// block.sync()) or a slot past the kTilesPerBlock sums makes the block's sum a NaN.
TEST_P(CoopBlockCorrectness, BlockSums) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  const std::uint64_t seed = kSeed + 2 * n;
  const auto h_in = cudalab::random_vector<float>(n, seed, 1.0f, 2.0f);
  const std::size_t blocks = cudalab::ceil_div<std::size_t>(n, kBlockItems);
  std::vector<double> expected(blocks, 0.0);
  for (std::size_t i = 0; i < n; ++i) expected[i / kBlockItems] += h_in[i];
  GuardedBuffer<float> d_in(h_in), d_out(blocks);
  cudalab::poison(d_out);
  scribble_shared_memory();
  block_sums(d_in.data(), d_out.data(), n);
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(AllNear(expected, d_out.to_host(), {relative_tolerance(kBlockItems), 0.0}, seed))
      << "one sum per " << kBlockItems << " values, n = " << n;
  EXPECT_TRUE(d_out.guards_intact("the block sums"));
  EXPECT_TRUE(d_in.guards_intact("the input (read only)"));
}
INSTANTIATE_TEST_SUITE_P(, CoopBlockCorrectness, ::testing::ValuesIn(with_zero(kSizes)), cudalab::SizeName());

// --- Task 3: warp vote -----------------------------------------------------------------------------

constexpr float kThreshold = 0.5f;

// Values in [0, 1) arranged so that every vote outcome occurs, group by group (g = index / 32):
// g % 4 == 0: every value above the threshold; 1: none, and one of them exactly at the threshold (not
// above it); 2: exactly one above, at a random lane; 3: random, with one value exactly at the threshold.
// The last group (often short) is all above: lanes past the end must not veto "all".
std::vector<float> vote_input(std::size_t n, std::uint64_t seed) {
  auto v = cudalab::random_vector<float>(n, seed, 0.0f, 1.0f);
  if (n == 0) return v;
  cudalab::Rng rng(seed + 1);
  const std::size_t last = groups(n) - 1;
  for (std::size_t g = 0; g <= last; ++g) {
    const std::size_t begin = g * kGroup, end = std::min(n, begin + kGroup);
    const int pattern = g == last ? 0 : static_cast<int>(g % 4);
    const auto lucky = begin + static_cast<std::size_t>(rng.integer(0, kGroup - 1));
    for (std::size_t i = begin; i < end; ++i) {
      const float r = static_cast<float>(rng.uniform());
      if (pattern == 0) v[i] = 0.51f + 0.48f * r;
      if (pattern == 1 || pattern == 2) v[i] = 0.49f * r;
      if (pattern == 2 && i == lucky) v[i] = 0.51f + 0.48f * r;
      if ((pattern == 1 || pattern == 3) && i == lucky) v[i] = kThreshold;  // equal is not above
    }
  }
  return v;
}

class CoopVoteCorrectness : public cudalab::GpuTestWithParam<std::size_t> {
 protected:
  void check_count(const std::vector<float>& h_in, float threshold, std::uint64_t seed, const char* what) {
    const std::size_t n = h_in.size();
    unsigned int expected = 0;
    for (float x : h_in) expected += x > threshold ? 1 : 0;
    GuardedBuffer<float> d_in(h_in);
    GuardedBuffer<unsigned int> d_count(1);
    cudalab::poison(d_count);  // count_above must set the count itself
    count_above(d_in.data(), n, threshold, d_count.data());
    CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_TRUE(AllEqual(std::vector<unsigned int>{expected}, d_count.to_host(), seed))
        << "values above " << threshold << " among n = " << n << " (the count must be exact), " << what;
    EXPECT_TRUE(d_count.guards_intact("the count"));
  }
  void check_any_all(float threshold, const char* what) {
    const std::size_t n = GetParam();
    CUDALAB_SKIP_IF_LARGE(n);
    const std::uint64_t seed = kSeed + 4 * n;
    const auto h_in = vote_input(n, seed);
    std::vector<int> any(groups(n), 0), all(groups(n), 1);
    for (std::size_t i = 0; i < n; ++i) {
      const bool above = h_in[i] > threshold;
      any[i / kGroup] |= above ? 1 : 0;
      all[i / kGroup] &= above ? 1 : 0;
    }
    GuardedBuffer<float> d_in(h_in);
    GuardedBuffer<int> d_any(groups(n)), d_all(groups(n));
    cudalab::poison(d_any);
    cudalab::poison(d_all);
    warp_any_all(d_in.data(), n, threshold, d_any.data(), d_all.data());
    CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_TRUE(AllEqual(any, d_any.to_host(), seed)) << "d_any (1 if some value of the group is above), " << what;
    EXPECT_TRUE(AllEqual(all, d_all.to_host(), seed)) << "d_all (1 if every value of the group is above), " << what;
    EXPECT_TRUE(d_any.guards_intact("d_any"));
    EXPECT_TRUE(d_all.guards_intact("d_all"));
  }
};

// n = 0 included: the count is still set, to 0.
TEST_P(CoopVoteCorrectness, CountAbove) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  const std::uint64_t seed = kSeed + 3 * n;
  check_count(vote_input(n, seed), kThreshold, seed, "threshold 0.5: some values are exactly 0.5");
}

// Every value exactly at the threshold: none is above it.
TEST_P(CoopVoteCorrectness, CountAboveAllAtThreshold) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  check_count(std::vector<float>(n, kThreshold), kThreshold, kSeed, "every value equals the threshold");
}

TEST_P(CoopVoteCorrectness, AnyAll) { check_any_all(kThreshold, "threshold 0.5: every outcome occurs"); }

// Nothing is above 2: "any" is 0 everywhere, so lanes past the end must not vote true either.
TEST_P(CoopVoteCorrectness, AnyAllNoneAbove) { check_any_all(2.0f, "threshold 2: no value is above it"); }

INSTANTIATE_TEST_SUITE_P(, CoopVoteCorrectness, ::testing::ValuesIn(with_zero(kSizes)), cudalab::SizeName());

// --- Task 4: the cooperative grid size -------------------------------------------------------------

struct Probe {
  const char* name;
  const void* kernel;
  int threads;
  std::size_t dynamic_smem;
};

class CoopGridSizeCorrectness : public cudalab::GpuTest {};

// The answer must be exactly what fits on the GPU at once: the occupancy API's blocks per SM (for
// that kernel, block size and dynamic shared memory) times the SMs. A hard-coded number is right for
// at most one of these shapes.
TEST_F(CoopGridSizeCorrectness, MatchesTheOccupancyApi) {
  const Probe probes[] = {
      {"probe_light_kernel, 128 threads", reinterpret_cast<const void*>(probe_light_kernel), 128, 0},
      {"probe_light_kernel, 1024 threads", reinterpret_cast<const void*>(probe_light_kernel), 1024, 0},
      {"probe_light_kernel, 256 threads, 40 KiB dynamic shared memory",
       reinterpret_cast<const void*>(probe_light_kernel), 256, 40 * 1024},
      {"probe_heavy_kernel (40 KiB static shared memory), 256 threads",
       reinterpret_cast<const void*>(probe_heavy_kernel), 256, 0},
      {"probe_heavy_kernel, 256 threads, 6 KiB dynamic shared memory",
       reinterpret_cast<const void*>(probe_heavy_kernel), 256, 6 * 1024},
  };
  for (const Probe& p : probes) {
    int per_sm = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, p.kernel, p.threads, p.dynamic_smem));
    const int expected = per_sm * cudalab::sm_count();
    EXPECT_EQ(cooperative_grid_blocks(p.kernel, p.threads, p.dynamic_smem), expected)
        << p.name << ": " << per_sm << " blocks per SM x " << cudalab::sm_count() << " SMs";
  }
}

// A cooperative launch of that many blocks must succeed, and every block must be resident: all of
// them check in before the single grid.sync(), and block 0 counts them after it.
TEST_F(CoopGridSizeCorrectness, FullGridLaunchesAndMeets) {
  int supported = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrCooperativeLaunch, 0));
  if (!supported) CUDALAB_SKIP("this GPU does not support cooperative launches");
  const auto kernel = reinterpret_cast<const void*>(probe_grid_sync_kernel);
  const int blocks = cooperative_grid_blocks(kernel, 256, 0);
  ASSERT_GT(blocks, 0) << "cooperative_grid_blocks returned " << blocks;
  DeviceBuffer<unsigned int> d_arrived(1), d_seen(1);
  d_arrived.fill_bytes(0);
  cudalab::poison(d_seen);
  unsigned int* arrived = d_arrived.data();
  unsigned int* seen = d_seen.data();
  void* args[] = {&arrived, &seen};
  const cudaError_t err = cudaLaunchCooperativeKernel(kernel, dim3(blocks), dim3(256), args, 0, nullptr);
  ASSERT_EQ(err, cudaSuccess) << "a cooperative launch of " << blocks << " blocks failed: " << cudaGetErrorName(err);
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(AllEqual(std::vector<unsigned int>{static_cast<unsigned int>(blocks)}, d_seen.to_host(), 0))
      << "blocks that had arrived when block 0 passed grid.sync()";
}

// --- Task 5: cooperative reduce --------------------------------------------------------------------

class CoopReduceCorrectness : public cudalab::GpuTestWithParam<std::size_t> {};

// Three calls on the same buffers: nothing may depend on state left by a previous call. Before each,
// every partial is a NaN and shared memory holds NaNs: a block that adds partials before every block
// has stored its own (no grid-wide barrier) gets a NaN, not the right value from the call before.
TEST_P(CoopReduceCorrectness, Sum) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  const std::uint64_t seed = kSeed + 5 * n;
  const auto h_in = cudalab::random_vector<float>(n, seed, 1.0f, 2.0f);
  double expected = 0;
  for (float x : h_in) expected += x;
  GuardedBuffer<float> d_in(h_in), d_out(1);
  Partials partials;
  constexpr int kCalls = 3;
  for (int call = 0; call < kCalls; ++call) {
    cudalab::poison(d_out);
    float* d_partials = partials.poisoned();
    scribble_shared_memory();
    coop_reduce(d_in.data(), d_out.data(), n, d_partials);
    CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_TRUE(cudalab::Near(expected, d_out.to_host()[0], {relative_tolerance(n), 0.0}, seed))
        << "sum of n = " << n << " values in [1, 2), call " << call + 1;
    EXPECT_TRUE(d_out.guards_intact("the sum"));
    EXPECT_TRUE(partials.buffer.guards_intact("d_partials (one slot per block of a resident grid)"));
    EXPECT_TRUE(d_in.guards_intact("the input (read only)"));
  }
}
INSTANTIATE_TEST_SUITE_P(, CoopReduceCorrectness, ::testing::ValuesIn(kSizes), cudalab::SizeName());

// --- Task 6: subtract the mean ---------------------------------------------------------------------

class CoopSubtractMeanCorrectness : public cudalab::GpuTestWithParam<std::size_t> {};

// Values in [1, 2): the mean is about 1.5, and the outputs spread around 0. n = 1 is left out (its
// output is exactly 0, which proves nothing). Partials and shared memory hold NaNs before the call,
// as in task 5: a mean read before it is shared (a missing block.sync()) is a NaN.
TEST_P(CoopSubtractMeanCorrectness, SubtractMean) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  const std::uint64_t seed = kSeed + 6 * n;
  const auto h_in = cudalab::random_vector<float>(n, seed, 1.0f, 2.0f);
  double mean = 0;
  for (float x : h_in) mean += x;
  mean /= static_cast<double>(n);
  std::vector<double> expected(n);
  for (std::size_t i = 0; i < n; ++i) expected[i] = h_in[i] - mean;
  GuardedBuffer<float> d_in(h_in), d_out(n);
  Partials partials;
  cudalab::poison(d_out);
  float* d_partials = partials.poisoned();
  scribble_shared_memory();
  subtract_mean(d_in.data(), d_out.data(), n, d_partials);
  CUDA_CHECK(cudaDeviceSynchronize());
  // The float mean is off by at most mean * (sum tolerance + one division); the subtraction rounds once.
  const double abs_tol = mean * (relative_tolerance(n) + 0x1p-23) + 0x1p-24;
  EXPECT_TRUE(AllNear(expected, d_out.to_host(), {0.0, abs_tol}, seed))
      << "d_out[i] = d_in[i] - mean, n = " << n << ", mean = " << mean;
  EXPECT_TRUE(d_out.guards_intact("the output"));
  EXPECT_TRUE(partials.buffer.guards_intact("d_partials (one slot per block of a resident grid)"));
  EXPECT_TRUE(d_in.guards_intact("the input (read only)"));
}
const std::vector<std::size_t> kMeanSizes = {2, 31, 33, 255, 1000, 50001, (1u << 20) + 3, (1u << 24) + 5};
INSTANTIATE_TEST_SUITE_P(, CoopSubtractMeanCorrectness, ::testing::ValuesIn(kMeanSizes), cudalab::SizeName());

// --- Perf ------------------------------------------------------------------------------------------

class CoopPerf : public cudalab::GpuTestWithParam<std::size_t> {};

// GB/s = 4 N / t, coop_reduce against cub::DeviceReduce::Sum (two kernels) on the same buffers.
TEST_P(CoopPerf, Reduce) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  const std::size_t n = GetParam();
  const auto h_in = cudalab::random_vector<float>(n, kSeed + 7, 1.0f, 2.0f);
  double expected = 0;
  for (float x : h_in) expected += x;
  DeviceBuffer<float> d_in(h_in), d_out(1), d_partials(coop_partials_capacity());
  cudalab::poison(d_out);
  coop_reduce(d_in.data(), d_out.data(), n, d_partials.data());
  CUDA_CHECK(cudaDeviceSynchronize());
  if (!cudalab::Near(expected, d_out.to_host()[0], {relative_tolerance(n), 0.0}, kSeed + 7)) {
    CUDALAB_SKIP("coop_reduce is incorrect at this size: not timed");
  }
  std::size_t temp_bytes = 0;
  CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, temp_bytes, d_in.data(), d_out.data(), static_cast<int>(n)));
  DeviceBuffer<unsigned char> d_temp(temp_bytes);

  const int log2n = static_cast<int>(std::log2(static_cast<double>(n)));
  cudalab::bench::Suite suite(cudalab::bench::Work::bytes(4.0 * n), "N = 2^" + std::to_string(log2n));
  // Untimed, around every call of coop_reduce: the input negated in place (its sum negates exactly:
  // rounding is symmetric) and the output poisoned before it, synchronized whatever stream it uses; the
  // sum checked against the reference with the sign of the current input after it.
  double sign = 1.0;
  suite.add("impl", [&] { coop_reduce(d_in.data(), d_out.data(), n, d_partials.data()); })
      .prepare([&](int) {
        thrust::transform(thrust::device, d_in.data(), d_in.data() + n, d_in.data(), thrust::negate<float>());
        sign = -sign;
        cudalab::poison(d_out);
        CUDA_CHECK(cudaDeviceSynchronize());
      })
      .verify([&](int) {
        return static_cast<bool>(
            cudalab::Near(sign * expected, d_out.to_host()[0], {relative_tolerance(n), 0.0}, kSeed + 7));
      });
  suite.add("cub", [&] {
    CUDA_CHECK(cub::DeviceReduce::Sum(d_temp.data(), temp_bytes, d_in.data(), d_out.data(), static_cast<int>(n)));
  });
  suite.baseline("cub").floor_ms(cudalab::bench::copy_floor_ms(4.0 * n));
  suite.run();
  suite.record();
}
INSTANTIATE_TEST_SUITE_P(, CoopPerf, ::testing::Values(std::size_t{1} << 24, std::size_t{1} << 28), cudalab::SizeName());

class CoopSyncPerf : public cudalab::GpuTest {};

// The cost of one grid.sync(): a kernel that does nothing but 1000 of them, so its time in ms is the
// time of one barrier in microseconds. "impl" uses the full resident grid from the student's
// cooperative_grid_blocks (256 threads per block); "one_per_sm" one block per SM, for comparison.
TEST_F(CoopSyncPerf, GridSync) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  constexpr int kRounds = 1000;
  const auto kernel = reinterpret_cast<const void*>(sync_loop_kernel);
  int per_sm = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 256, 0));
  const int full = cooperative_grid_blocks(kernel, 256, 0);
  if (full <= 0 || full > per_sm * cudalab::sm_count()) {
    CUDALAB_SKIP("cooperative_grid_blocks is incorrect: not timed");
  }
  const int one_per_sm = cudalab::sm_count();
  int rounds = kRounds;
  void* args[] = {&rounds};
  cudalab::bench::Options options;
  options.flush_l2 = false;  // no data: nothing to flush
  cudalab::bench::Suite suite(cudalab::bench::Work::time_only(), "1000 grid.sync() per call: ms = us per sync",
                              options);
  suite.add("impl", [&] { CUDA_CHECK(cudaLaunchCooperativeKernel(kernel, dim3(full), dim3(256), args, 0, nullptr)); });
  suite.add("one_per_sm",
            [&] { CUDA_CHECK(cudaLaunchCooperativeKernel(kernel, dim3(one_per_sm), dim3(256), args, 0, nullptr)); });
  suite.run();
  suite.record();
  RecordProperty("blocks_impl", full);
  RecordProperty("blocks_one_per_sm", one_per_sm);
}

}  // namespace
