// Self-tests of the shared test-data and comparison helpers: the labs' inputs are only as trustworthy as these.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <cudalab/device_buffer.cuh>
#include <cudalab/device_compare.cuh>
#include <cudalab/device_random.cuh>
#include <cudalab/gtest_cuda.hpp>
#include <cudalab/random.hpp>

namespace {

// The reference: one generator drawn in order, the way random_vector worked before it used threads.
template <class T>
std::vector<T> sequential(std::size_t n, std::uint64_t seed, T lo, T hi) {
  cudalab::Rng rng(seed);
  std::vector<T> v(n);
  for (auto& x : v) x = cudalab::draw(rng, lo, hi);
  return v;
}

// Sizes below, at and above the threaded path's chunk (2^20), and not multiples of anything.
const std::vector<std::size_t> kSizes = {0, 1, 1000, (std::size_t{1} << 20) + 1, (std::size_t{1} << 22) + 7};

TEST(RandomVector, ThreadsDrawTheSequentialStream) {
  for (std::size_t n : kSizes) {
    EXPECT_EQ(sequential<float>(n, 11 + n, 1.0f, 2.0f), cudalab::random_vector<float>(n, 11 + n, 1.0f, 2.0f)) << n;
    EXPECT_EQ(sequential<int>(n, 12, -5, 100), cudalab::random_vector<int>(n, 12, -5, 100)) << n;
  }
}

TEST(RandomVector, StaysInRange) {
  const auto f = cudalab::random_vector<float>(100000, 5, 10.0f, 20.0f);
  const auto i = cudalab::random_vector<int>(100000, 6, -3, 3);
  for (float x : f) ASSERT_TRUE(x >= 10.0f && x < 20.0f) << x;
  bool seen_lo = false, seen_hi = false;
  for (int x : i) {
    ASSERT_TRUE(x >= -3 && x <= 3) << x;
    seen_lo |= x == -3;
    seen_hi |= x == 3;
  }
  EXPECT_TRUE(seen_lo && seen_hi) << "integer bounds are inclusive";
}

class RandomFill : public cudalab::GpuTest {};

TEST_F(RandomFill, MatchesRandomVector) {
  for (std::size_t n : kSizes) {
    cudalab::DeviceBuffer<float> d_f(n);
    cudalab::DeviceBuffer<int> d_i(n);
    cudalab::DeviceBuffer<double> d_d(n);
    cudalab::random_fill(d_f.data(), n, 21 + n, 1.0f, 2.0f);
    cudalab::random_fill(d_i.data(), n, 22, -1000, 1000);
    cudalab::random_fill(d_d.data(), n, 23, -1.0, 1.0);
    EXPECT_EQ(cudalab::random_vector<float>(n, 21 + n, 1.0f, 2.0f), d_f.to_host()) << n;
    EXPECT_EQ(cudalab::random_vector<int>(n, 22, -1000, 1000), d_i.to_host()) << n;
    EXPECT_EQ(cudalab::random_vector<double>(n, 23, -1.0, 1.0), d_d.to_host()) << n;
  }
}

class DeviceAllEqual : public cudalab::GpuTest {};

TEST_F(DeviceAllEqual, PassesEqualAndNamesTheFirstDifference) {
  const std::size_t n = 100000;
  cudalab::DeviceBuffer<int> d_a(n), d_b(n);
  cudalab::random_fill(d_a.data(), n, 31, 1, 1000);
  cudalab::random_fill(d_b.data(), n, 31, 1, 1000);
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(cudalab::DeviceAllEqual(d_a, d_b, 31));
  EXPECT_TRUE(cudalab::DeviceAllEqual(cudalab::DeviceBuffer<int>(), cudalab::DeviceBuffer<int>(), 31));

  const int wrong = -5;
  CUDA_CHECK(cudaMemcpy(d_b.data() + 777, &wrong, sizeof(int), cudaMemcpyHostToDevice));
  const auto r = cudalab::DeviceAllEqual(d_a, d_b, 31);
  ASSERT_FALSE(r);
  EXPECT_NE(std::string(r.message()).find("1 of 100000 elements differ (seed 31"), std::string::npos) << r.message();
  EXPECT_NE(std::string(r.message()).find("[777]"), std::string::npos) << r.message();
  EXPECT_FALSE(cudalab::DeviceAllEqual(d_a, cudalab::DeviceBuffer<int>(n - 1), 31)) << "sizes differ";
}

}  // namespace
