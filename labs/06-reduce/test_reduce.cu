// Lab 06 tests. Correctness tests judge; perf tests only measure (the grader scores speed).
#include <gtest/gtest.h>

#include <cub/device/device_reduce.cuh>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>

#include <cmath>
#include <cstdint>
#include <map>
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

#include "reduce.cuh"

namespace {

using cudalab::DeviceBuffer;
using cudalab::GuardedBuffer;

constexpr std::uint64_t kSeed = 6006;

template <class T>
using ReduceFn = void (*)(const T* d_in, T* d_out, std::size_t n, ReduceWorkspace& ws);

// Values in [1, 2): positive, so the sum has no cancellation and grows with n, far from 0. The last
// three values are large (about n / 128 each): a kernel that drops the tail (n % 4, the last partial
// block) then fails at every size, not only at the small ones where one value is a visible share.
std::vector<float> float_input(std::size_t n, std::uint64_t seed) {
  auto v = cudalab::random_vector<float>(n, seed, 1.0f, 2.0f);
  const float boost = 1.0f + static_cast<float>(n) / 128.0f;
  for (std::size_t i = n > 3 ? n - 3 : 0; i < n; ++i) v[i] *= boost;
  return v;
}

// Values in [1, 100]: the sum of (2^24 + 5) of them stays below 2^31, and any lost, doubled or stale
// value changes it, so an int reduction must match exactly. This is what catches a missing barrier.
std::vector<int> int_input(std::size_t n, std::uint64_t seed) { return cudalab::random_vector<int>(n, seed, 1, 100); }

template <class T>
double reference_sum(const std::vector<T>& v) {
  double s = 0;
  for (T x : v) s += static_cast<double>(x);  // float64 (exact for these ints)
  return s;
}

// Adding n positive floats in an order where no value goes through more than d roundings has a
// relative error of at most d*u / (1 - d*u), with u = 2^-24 (Higham, Accuracy and Stability of
// Numerical Algorithms, 2nd ed., section 4.2). A tree over n values has depth ceil(log2 n); we allow 64
// more roundings for the values a thread adds up on its own before the tree. Real sums land far
// inside this worst case.
double relative_tolerance(std::size_t n) {
  const double d = std::ceil(std::log2(static_cast<double>(n))) + 64.0;
  const double u = 0x1p-24;
  return d * u / (1.0 - d * u);
}

// Junk in the shared memory of every SM before each call: a kernel that reads a slot it never wrote
// (a tail it did not zero, warp sums past the last warp, a flag before thread 0 set it) then sees
// 0x5A5A5A5A, a large int and a huge float, not the zeros of a fresh GPU or a value an earlier block
// happened to leave there. Left out in small mode, where compute-sanitizer watches every access itself
// (and would take seconds over these 60 MB of stores).
void scribble_shared_memory() { cudalab::scribble_shared_memory({0x5A5A5A5Au}); }

// Runs fn once and returns the value it left in *d_out. Input and output lie between guard zones of
// junk: a value read past the end of the input spoils the sum, and a write anywhere next to *d_out (or
// to the input) fails the test. The output is poisoned, so a call that never writes it fails too.
template <class T>
T run_once(ReduceFn<T> fn, const std::vector<T>& h_in) {
  GuardedBuffer<T> d_in(h_in), d_out(1);
  ReduceWorkspace ws(h_in.size());
  cudalab::poison(d_out);
  scribble_shared_memory();
  fn(d_in.data(), d_out.data(), h_in.size(), ws);
  EXPECT_TRUE(d_out.guards_intact("*d_out (one value)"));  // synchronizes
  EXPECT_TRUE(d_in.guards_intact("the input")) << "the input is read-only";
  return d_out.to_host()[0];
}

// Sizes around warp and block boundaries, odd sizes, many blocks (50001 still runs under the
// sanitizer's small mode), several passes, and a large size.
const std::vector<std::size_t> kSizes = {1, 31, 32, 33, 255, 256, 257, 50001, (1u << 20) + 3, (1u << 24) + 5};

class ReduceCorrectness : public cudalab::GpuTestWithParam<std::size_t> {
 protected:
  void check_float(ReduceFn<float> fn) {
    const std::size_t n = GetParam();
    CUDALAB_SKIP_IF_LARGE(n);
    const std::uint64_t seed = kSeed + n;
    const auto h_in = float_input(n, seed);
    const float actual = run_once(fn, h_in);
    EXPECT_TRUE(cudalab::Near(reference_sum(h_in), actual, {relative_tolerance(n), 0.0}, seed))
        << "float sum of n = " << n << " values in [1, 2) (the last three scaled up)";
  }
  void check_int(ReduceFn<int> fn) {
    const std::size_t n = GetParam();
    CUDALAB_SKIP_IF_LARGE(n);
    const std::uint64_t seed = kSeed + 2 * n + 1;
    const auto h_in = int_input(n, seed);
    const int actual = run_once(fn, h_in);
    const auto expected = static_cast<std::int64_t>(reference_sum(h_in));
    EXPECT_TRUE(cudalab::AllEqual(std::vector<std::int64_t>{expected}, std::vector<int>{actual}, seed))
        << "int sum of n = " << n << " values in [1, 100] must be exact; off by "
        << static_cast<std::int64_t>(actual) - expected;
  }
};

// --- Step 1: interleaved addressing ----------------------------------------------------------------
TEST_P(ReduceCorrectness, Interleaved) { check_float(reduce_interleaved); }
TEST_P(ReduceCorrectness, InterleavedInt) { check_int(reduce_interleaved); }

// --- Step 2: sequential addressing -----------------------------------------------------------------
TEST_P(ReduceCorrectness, Sequential) { check_float(reduce_sequential); }
TEST_P(ReduceCorrectness, SequentialInt) { check_int(reduce_sequential); }

// --- Step 3: first add during load -----------------------------------------------------------------
TEST_P(ReduceCorrectness, FirstAdd) { check_float(reduce_first_add); }
TEST_P(ReduceCorrectness, FirstAddInt) { check_int(reduce_first_add); }

// --- Step 4: warp shuffle --------------------------------------------------------------------------
TEST_P(ReduceCorrectness, Shuffle) { check_float(reduce_shuffle); }
TEST_P(ReduceCorrectness, ShuffleInt) { check_int(reduce_shuffle); }

// --- Step 5: single pass with a last-block guard ---------------------------------------------------
TEST_P(ReduceCorrectness, SinglePass) { check_float(reduce_single_pass); }
TEST_P(ReduceCorrectness, SinglePassInt) { check_int(reduce_single_pass); }

INSTANTIATE_TEST_SUITE_P(, ReduceCorrectness, ::testing::ValuesIn(kSizes), cudalab::SizeName());

class ReduceSinglePassCorrectness : public cudalab::GpuTest {
 protected:
  // Calls reduce_single_pass on new int data of each size in turn, all on one workspace, and checks each
  // sum and that the counter is back at zero after each call.
  void calls_in_turn(const std::vector<std::size_t>& sizes, ReduceWorkspace& ws) {
    GuardedBuffer<int> d_out(1);
    for (std::size_t call = 0; call < sizes.size(); ++call) {
      const std::size_t n = sizes[call];
      const std::uint64_t seed = kSeed + 100 + call;
      const auto h_in = int_input(n, seed);
      GuardedBuffer<int> d_in(h_in);
      cudalab::poison(d_out);
      scribble_shared_memory();
      reduce_single_pass(d_in.data(), d_out.data(), n, ws);
      EXPECT_TRUE(d_out.guards_intact("*d_out (one value)"));
      const auto expected = static_cast<std::int64_t>(reference_sum(h_in));
      EXPECT_TRUE(cudalab::AllEqual(std::vector<std::int64_t>{expected}, d_out.to_host(), seed))
          << "call " << call + 1 << " of " << sizes.size() << " on the same workspace, n = " << n;
      unsigned int counter = 0xA5A5A5A5u;
      CUDA_CHECK(cudaMemcpy(&counter, ws.counter(), sizeof counter, cudaMemcpyDeviceToHost));
      EXPECT_EQ(counter, 0u) << "after call " << call + 1 << " (n = " << n
                             << "), the counter is not back at zero: the last block must reset it";
    }
  }
};

// Three calls on one workspace, each on new data: a counter left at a non-zero value makes the next
// call's last block miss its ticket, and that call never writes its result.
TEST_F(ReduceSinglePassCorrectness, ResetsTheCounterForTheNextCall) {
  const std::size_t n = 50001;
  ReduceWorkspace ws(n);
  calls_in_turn({n, n, n}, ws);
}

// Calls of different sizes on one workspace (made for the largest), so grids of different sizes take
// their tickets from the same counter one after the other: one block, many blocks, one block again.
TEST_F(ReduceSinglePassCorrectness, SizesInTurnOnOneWorkspace) {
  const std::vector<std::size_t> sizes = {50001, 1, 257, 33, 4099, 50001};
  ReduceWorkspace ws(50001);
  calls_in_turn(sizes, ws);
}

// --- Every block has values to add ------------------------------------------------------------------

// Steps 1 and 2 launch one block per 256 values in each pass, steps 3 and 4 one per 512: every block
// has values to add. The workspace starts as 0xFF bytes and every partial of values >= 1 is >= 1, so a
// partial of 0 is a block that summed nothing: a grid larger than the data needs (step 3 sized for 256
// values per block, say), which the sum alone cannot show.
class ReduceGridCorrectness : public cudalab::GpuTestWithParam<std::size_t> {
 protected:
  void check(ReduceFn<int> fn, std::size_t values_per_block) {
    const std::size_t n = GetParam();
    CUDALAB_SKIP_IF_LARGE(n);
    const std::uint64_t seed = kSeed + 3 * n;
    const auto h_in = int_input(n, seed);
    GuardedBuffer<int> d_in(h_in), d_out(1);
    ReduceWorkspace ws(n);
    cudalab::poison(d_out);
    fn(d_in.data(), d_out.data(), n, ws);
    EXPECT_TRUE(d_out.guards_intact("*d_out (one value)"));
    const auto expected = static_cast<std::int64_t>(reference_sum(h_in));
    EXPECT_TRUE(cudalab::AllEqual(std::vector<std::int64_t>{expected}, d_out.to_host(), seed)) << "n = " << n;
    std::vector<int> partials(ws.capacity());
    CUDA_CHECK(cudaMemcpy(partials.data(), ws.partials<int>(), partials.size() * sizeof(int), cudaMemcpyDeviceToHost));
    std::size_t empty = 0;
    for (int p : partials) empty += p == 0 ? 1 : 0;
    std::size_t blocks = 0;  // what the passes need: one block per values_per_block values, until one is left
    for (std::size_t count = n; count > 1; count = cudalab::ceil_div(count, values_per_block)) {
      blocks += cudalab::ceil_div(count, values_per_block);
    }
    EXPECT_EQ(empty, 0u) << empty << " block(s) wrote a partial sum of 0: they had no values to add. With "
                         << values_per_block << " values per block, n = " << n << " needs " << blocks
                         << " block(s) in all passes together; is the grid sized for the values one block covers?";
  }
};

TEST_P(ReduceGridCorrectness, Interleaved) { check(reduce_interleaved, 256); }
TEST_P(ReduceGridCorrectness, Sequential) { check(reduce_sequential, 256); }
TEST_P(ReduceGridCorrectness, FirstAdd) { check(reduce_first_add, 512); }
TEST_P(ReduceGridCorrectness, Shuffle) { check(reduce_shuffle, 512); }

INSTANTIATE_TEST_SUITE_P(, ReduceGridCorrectness, ::testing::Values(std::size_t{50001}, (std::size_t{1} << 20) + 3),
                         cudalab::SizeName());

// --- More than 2^32 values ---------------------------------------------------------------------------

// n is a size_t: an index or a count kept in 32 bits wraps around past 2^32 values (and an int one turns
// negative past 2^31). 2^32 + 2^20 + 3 ints are 16 GiB, made on the GPU.
constexpr std::size_t kHugeN = (std::size_t{1} << 32) + (std::size_t{1} << 20) + 3;

// Value i: 1 to 3 (from a hash of i), negative in every other run of 2^20 values, with the signs of the
// runs flipped again past 2^32. Any run read twice, dropped, or read from the wrong place (2^32 values
// too early, the start of the array again) moves the sum by about 2^21, while no partial sum of any
// run of values comes near 2^31.
struct HugeValue {
  __host__ __device__ long long operator()(std::size_t i) const {
    const bool negative = (((i >> 20) ^ (i >> 32)) & 1) == 0;
    const auto magnitude = static_cast<long long>(1 + ((i * 0x9E3779B97F4A7C15ull) >> 62) % 3);
    return negative ? -magnitude : magnitude;
  }
};

__global__ void fill_huge_kernel(int* values, std::size_t n) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    values[i] = static_cast<int>(HugeValue{}(i));
  }
}

class ReduceHugeCorrectness : public cudalab::GpuTest {
 protected:
  void check(ReduceFn<int> fn) {
    CUDALAB_SKIP_IF_LARGE(kHugeN);
    const std::size_t need = kHugeN * sizeof(int) + ReduceWorkspace::partials_capacity(kHugeN) * sizeof(int);
    CUDALAB_SKIP_UNLESS_GPU_MEMORY(need);
    DeviceBuffer<int> d_in(kHugeN);
    fill_huge_kernel<<<4 * cudalab::sm_count(), 256>>>(d_in.data(), kHugeN);
    CUDA_CHECK_LAST();
    const long long expected =
        thrust::transform_reduce(thrust::device, thrust::counting_iterator<std::size_t>(0),
                                 thrust::counting_iterator<std::size_t>(kHugeN), HugeValue{}, 0ll, thrust::plus<long long>());
    ReduceWorkspace ws(kHugeN);
    GuardedBuffer<int> d_out(1);
    cudalab::poison(d_out);
    fn(d_in.data(), d_out.data(), kHugeN, ws);
    EXPECT_TRUE(d_out.guards_intact("*d_out (one value)"));
    EXPECT_TRUE(cudalab::AllEqual(std::vector<long long>{expected}, d_out.to_host(), kSeed))
        << "int sum of n = 2^32 + 2^20 + 3 values: are indices and counts std::size_t all the way "
           "(blockIdx.x * blockDim.x is 32-bit unless cast first)?";
  }
};

TEST_F(ReduceHugeCorrectness, Interleaved) { check(reduce_interleaved); }
TEST_F(ReduceHugeCorrectness, Sequential) { check(reduce_sequential); }
TEST_F(ReduceHugeCorrectness, FirstAdd) { check(reduce_first_add); }
TEST_F(ReduceHugeCorrectness, Shuffle) { check(reduce_shuffle); }
TEST_F(ReduceHugeCorrectness, SinglePass) { check(reduce_single_pass); }

// --- Perf -------------------------------------------------------------------------------------------

// The same input for every perf test of one size: generating 2^28 values once is enough.
struct PerfInput {
  std::vector<float> values;
  double sum = 0;
};
const PerfInput& perf_input(std::size_t n) {
  static std::map<std::size_t, PerfInput> cache;
  auto it = cache.find(n);
  if (it == cache.end()) {
    PerfInput in;
    in.values = float_input(n, kSeed + 7);
    in.sum = reference_sum(in.values);
    it = cache.emplace(n, std::move(in)).first;
  }
  return it->second;
}

std::string size_label(std::size_t n) {
  const int log2n = static_cast<int>(std::log2(static_cast<double>(n)));
  if ((std::size_t{1} << log2n) == n) return "N = 2^" + std::to_string(log2n);
  return "N = " + std::to_string(n);
}

struct Step {
  const char* name;
  ReduceFn<float> fn;
};
const Step kSteps[] = {{"interleaved", reduce_interleaved},
                       {"sequential", reduce_sequential},
                       {"first_add", reduce_first_add},
                       {"shuffle", reduce_shuffle},
                       {"single_pass", reduce_single_pass}};

class ReducePerf : public cudalab::GpuTestWithParam<std::size_t> {
 protected:
  // GB/s = 4 N / t: each float is read once. The function under test ("impl") and
  // cub::DeviceReduce::Sum run alternately on the same input and output buffers; with
  // all_steps, every other step that is correct at this size joins the chart as well.
  void time_step(const char* name, ReduceFn<float> fn, bool all_steps) {
    CUDALAB_SKIP_PERF_IN_SMALL_MODE();
    const std::size_t n = GetParam();
    const PerfInput& in = perf_input(n);
    DeviceBuffer<float> d_in(in.values), d_out(1);
    ReduceWorkspace ws(n);

    double sign = 1.0;  // d_in holds sign * in.values: the impl's prepare negates it before every call
    auto sum_ok = [&] {
      CUDA_CHECK(cudaDeviceSynchronize());
      return static_cast<bool>(
          cudalab::Near(sign * in.sum, d_out.to_host()[0], {relative_tolerance(n), 0.0}, kSeed + 7));
    };
    auto correct = [&](ReduceFn<float> f) {
      cudalab::poison(d_out);
      f(d_in.data(), d_out.data(), n, ws);
      return sum_ok();
    };
    if (!correct(fn)) CUDALAB_SKIP(name << " is incorrect at this size: not timed");

    std::size_t temp_bytes = 0;
    CUDA_CHECK(cub::DeviceReduce::Sum(nullptr, temp_bytes, d_in.data(), d_out.data(), static_cast<int>(n)));
    DeviceBuffer<unsigned char> d_temp(temp_bytes);

    cudalab::bench::Suite suite(cudalab::bench::Work::bytes(4.0 * n), size_label(n));
    // Before every impl call: the input negated in place (exact: added in any order, negated values give
    // the negated float sum) and the output poisoned, so a sum kept from the previous call, or none, fails.
    suite.add("impl", [&] { fn(d_in.data(), d_out.data(), n, ws); })
        .prepare([&](int) {
          thrust::transform(thrust::device, d_in.data(), d_in.data() + n, d_in.data(), thrust::negate<float>());
          sign = -sign;
          cudalab::poison(d_out);
        })
        .verify([&](int) { return sum_ok(); });
    suite.add("cub", [&] {
      CUDA_CHECK(cub::DeviceReduce::Sum(d_temp.data(), temp_bytes, d_in.data(), d_out.data(), static_cast<int>(n)));
    });
    if (all_steps) {
      for (const Step& step : kSteps) {
        if (step.fn == fn || !correct(step.fn)) continue;
        suite.add(step.name, [&, f = step.fn] { f(d_in.data(), d_out.data(), n, ws); });
      }
    }
    suite.baseline("cub").floor_ms(cudalab::bench::copy_floor_ms(4.0 * n));
    suite.run();
    suite.record();
  }
};

TEST_P(ReducePerf, Interleaved) { time_step("reduce_interleaved", reduce_interleaved, false); }
TEST_P(ReducePerf, Sequential) { time_step("reduce_sequential", reduce_sequential, false); }
TEST_P(ReducePerf, FirstAdd) { time_step("reduce_first_add", reduce_first_add, false); }
TEST_P(ReducePerf, Shuffle) { time_step("reduce_shuffle", reduce_shuffle, false); }
TEST_P(ReducePerf, SinglePass) { time_step("reduce_single_pass", reduce_single_pass, true); }

INSTANTIATE_TEST_SUITE_P(, ReducePerf, ::testing::Values(std::size_t{1} << 24, std::size_t{1} << 28),
                         cudalab::SizeName());

}  // namespace
