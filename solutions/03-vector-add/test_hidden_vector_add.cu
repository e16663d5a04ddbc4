// Lab 03 hidden tests: the same functions as the public tests, on sizes and grids they do not use.
// Instructor-only: never in a student release. Scored by the hidden task in labs/03-vector-add/lab.toml;
// shown to students as lab.toml's [hidden] visibility says (docs/instructors.md).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <cudalab/check.cuh>
#include <cudalab/compare.hpp>
#include <cudalab/device_buffer.cuh>
#include <cudalab/gtest_cuda.hpp>
#include <cudalab/guarded_buffer.cuh>
#include <cudalab/random.hpp>

#include "vector_add.cuh"

namespace {

using cudalab::AllEqual;
using cudalab::DeviceBuffer;

constexpr std::uint64_t kSeed = 93003;  // not the public tests' seed: other values, too

struct Inputs {
  std::vector<float> a, b, expected;
};

// Values in [2, 3) and [30, 40): sums far from zero and from any poison or default value.
Inputs make_inputs(std::size_t n, std::uint64_t seed) {
  Inputs in;
  in.a = cudalab::random_vector<float>(n, seed, 2.0f, 3.0f);
  in.b = cudalab::random_vector<float>(n, seed + 1, 30.0f, 40.0f);
  in.expected.resize(n);
  for (std::size_t i = 0; i < n; ++i) in.expected[i] = in.a[i] + in.b[i];
  return in;
}

// The output is poisoned and guarded (a write past either end fails the test); the inputs are plain
// allocations of exactly n floats, so compute-sanitizer's memcheck sees a read past their end.
template <class Launch>
std::vector<float> run_device(const Inputs& in, const char* what, Launch launch) {
  DeviceBuffer<float> d_a(in.a), d_b(in.b);
  cudalab::GuardedBuffer<float> d_c(in.a.size());
  cudalab::poison(d_c);
  launch(d_a.data(), d_b.data(), d_c.data(), in.a.size());
  EXPECT_TRUE(d_c.guards_intact(what));  // synchronizes first
  return d_c.to_host();
}

// None of these is a public test size: odd remainders after 32, 128, 256 and 1024, a prime, and
// 2^24 + 13 (a tail after the last full block and after any float4 vectorization).
const std::vector<std::size_t> kSizes = {7, 33, 511, 4097, 65537, 999999, (std::size_t{1} << 24) + 13};

class VectorAddHiddenCorrectness : public cudalab::GpuTestWithParam<std::size_t> {};

TEST_P(VectorAddHiddenCorrectness, HostFlow) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  const Inputs in = make_inputs(n, kSeed + n);
  EXPECT_TRUE(AllEqual(in.expected, vector_add_host(in.a, in.b), kSeed + n));
}

TEST_P(VectorAddHiddenCorrectness, OneThreadPerElement) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  const Inputs in = make_inputs(n, kSeed + 2 * n);
  const auto out = run_device(in, "c (vector_add)", [](const float* a, const float* b, float* c, std::size_t m) {
    vector_add(a, b, c, static_cast<int>(m));
  });
  EXPECT_TRUE(AllEqual(in.expected, out, kSeed + 2 * n));
}

TEST_P(VectorAddHiddenCorrectness, Fast) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  const Inputs in = make_inputs(n, kSeed + 6 * n);
  const auto out = run_device(in, "c (vector_add_fast)",
                              [](const float* a, const float* b, float* c, std::size_t m) { vector_add_fast(a, b, c, m); });
  EXPECT_TRUE(AllEqual(in.expected, out, kSeed + 6 * n));
}
INSTANTIATE_TEST_SUITE_P(, VectorAddHiddenCorrectness, ::testing::ValuesIn(kSizes), cudalab::SizeName());

// --- grid-stride loop on odd grids ------------------------------------------------------------------

struct GridCase {
  std::size_t n;
  int blocks, threads;
};

class VectorAddHiddenGridStrideCorrectness : public cudalab::GpuTestWithParam<GridCase> {};

// Block sizes that are not multiples of 32, odd block counts, a grid larger than n, one thread per block.
TEST_P(VectorAddHiddenGridStrideCorrectness, CoversEveryElement) {
  const GridCase c = GetParam();
  CUDALAB_SKIP_IF_LARGE(c.n);
  const Inputs in = make_inputs(c.n, kSeed + c.n + c.blocks);
  const auto out = run_device(in, "c (vector_add_grid_stride)", [&](const float* a, const float* b, float* d_c, std::size_t m) {
    vector_add_grid_stride(a, b, d_c, m, c.blocks, c.threads);
  });
  EXPECT_TRUE(AllEqual(in.expected, out, kSeed + c.n + c.blocks))
      << "grid of " << c.blocks << " blocks x " << c.threads << " threads, n = " << c.n;
}
INSTANTIATE_TEST_SUITE_P(, VectorAddHiddenGridStrideCorrectness,
                         ::testing::Values(GridCase{100, 1000, 64}, GridCase{4097, 4097, 1}, GridCase{65537, 1, 33},
                                           GridCase{999999, 17, 96}, GridCase{(std::size_t{1} << 24) + 13, 13, 160}),
                         [](const ::testing::TestParamInfo<GridCase>& info) {
                           return "n" + std::to_string(info.param.n) + "_grid" + std::to_string(info.param.blocks) +
                                  "_block" + std::to_string(info.param.threads);
                         });

}  // namespace
