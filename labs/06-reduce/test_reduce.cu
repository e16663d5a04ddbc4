// Lab 06 tests. Correctness tests judge; perf tests only measure (the grader scores speed).
#include <gtest/gtest.h>

#include <cub/device/device_reduce.cuh>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/transform.h>

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
#include <cudalab/random.hpp>

#include "reduce.cuh"

namespace {

using cudalab::DeviceBuffer;

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

// Runs fn once on fresh buffers with a poisoned output and returns the value it left in *d_out.
template <class T>
T run_once(ReduceFn<T> fn, const std::vector<T>& h_in) {
  DeviceBuffer<T> d_in(h_in), d_out(1);
  ReduceWorkspace ws(h_in.size());
  cudalab::poison(d_out);
  fn(d_in.data(), d_out.data(), h_in.size(), ws);
  CUDA_CHECK(cudaDeviceSynchronize());
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

class ReduceSinglePassCorrectness : public cudalab::GpuTest {};

// Three calls on one workspace, each on new data: a counter left at a non-zero value makes the next
// call's last block miss its ticket, and that call never writes its result.
TEST_F(ReduceSinglePassCorrectness, ResetsTheCounterForTheNextCall) {
  const std::size_t n = 50001;
  ReduceWorkspace ws(n);
  DeviceBuffer<int> d_out(1);
  for (int call = 0; call < 3; ++call) {
    const std::uint64_t seed = kSeed + 100 + call;
    const auto h_in = int_input(n, seed);
    DeviceBuffer<int> d_in(h_in);
    cudalab::poison(d_out);
    reduce_single_pass(d_in.data(), d_out.data(), n, ws);
    CUDA_CHECK(cudaDeviceSynchronize());
    const auto expected = static_cast<std::int64_t>(reference_sum(h_in));
    EXPECT_TRUE(cudalab::AllEqual(std::vector<std::int64_t>{expected}, d_out.to_host(), seed))
        << "call " << call + 1 << " of 3 on the same workspace";
    unsigned int counter = 0xA5A5A5A5u;
    CUDA_CHECK(cudaMemcpy(&counter, ws.counter(), sizeof counter, cudaMemcpyDeviceToHost));
    EXPECT_EQ(counter, 0u) << "after call " << call + 1
                           << ", the counter is not back at zero: the last block must reset it";
  }
}

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
