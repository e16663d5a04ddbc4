// Lab 03 tests. Correctness tests judge; perf tests only measure (the grader scores speed).
#include <gtest/gtest.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>
#include <thrust/functional.h>
#include <thrust/inner_product.h>
#include <thrust/transform.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <cudalab/bench.cuh>
#include <cudalab/check.cuh>
#include <cudalab/compare.hpp>
#include <cudalab/device_buffer.cuh>
#include <cudalab/device_random.cuh>
#include <cudalab/gtest_cuda.hpp>
#include <cudalab/resource_tally.hpp>
#include <cudalab/guarded_buffer.cuh>
#include <cudalab/random.hpp>

#include "vector_add.cuh"

namespace {

using cudalab::AllEqual;
using cudalab::DeviceBuffer;
using cudalab::GuardedBuffer;

constexpr std::uint64_t kSeed = 3003;

struct Inputs {
  std::vector<float> a, b, expected;
};

// Values in [1, 2) and [10, 20): sums are far from zero and from any poison or default value.
Inputs make_inputs(std::size_t n, std::uint64_t seed) {
  Inputs in;
  in.a = cudalab::random_vector<float>(n, seed, 1.0f, 2.0f);
  in.b = cudalab::random_vector<float>(n, seed + 1, 10.0f, 20.0f);
  in.expected.resize(n);
  for (std::size_t i = 0; i < n; ++i) in.expected[i] = in.a[i] + in.b[i];  // exact in float, as on the GPU
  return in;
}

// Runs one device-pointer variant on fresh buffers and returns the output. The output is poisoned and
// guarded (a write past either end fails the test); the inputs are plain allocations of exactly n
// floats, so compute-sanitizer's memcheck reports a read past their end.
template <class Launch>
std::vector<float> run_device(const Inputs& in, const char* what, Launch launch) {
  DeviceBuffer<float> d_a(in.a), d_b(in.b);
  GuardedBuffer<float> d_c(in.a.size());
  cudalab::poison(d_c);
  launch(d_a.data(), d_b.data(), d_c.data(), in.a.size());
  EXPECT_TRUE(d_c.guards_intact(what));  // synchronizes first
  return d_c.to_host();
}

// Sizes around block boundaries (256), odd sizes, and sizes needing many blocks; 0 (nothing to do,
// nothing launched); 5003 and 100003, whose float4 counts (1250, 25000) are not multiples of the
// 1024 float4s a block of the reference's fast kernel covers. Every correctness test runs on all.
const std::vector<std::size_t> kSizes = {0,    1,    2,    3,      5,           31,          255,
                                         256,  257,  1000, 1025,   5003,        100003,      (1u << 20) + 3,
                                         (1u << 24) + 1};

// Above 2^31 elements, where an int index overflows: 2^29 + 1000 float4s and a tail of 3. The huge
// tests make their inputs on the GPU and check there, and need 8 or 16 GiB of device memory.
constexpr std::size_t kHugeN = (std::size_t{1} << 31) + 4003;

// Counts the i in [0, n) where out[i] != factor * v(i), v(i) being element i of
// random_fill(seed, lo, hi) (recomputed here, so no copy of the input is kept), and the first such i.
__global__ void count_scaled_mismatches(const float* out, std::size_t n, std::uint64_t seed, float lo, float hi,
                                        float factor, unsigned long long* count, unsigned long long* first) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  unsigned long long mine = 0;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    cudalab::Rng rng = cudalab::Rng::at(seed, i);
    const float expected = factor * cudalab::draw(rng, lo, hi);
    if (!(out[i] == expected)) {  // NaN (the poison) never matches
      ++mine;
      atomicMin(first, static_cast<unsigned long long>(i));
    }
  }
  if (mine) atomicAdd(count, mine);
}

// Every out[i] is factor * v(i) (see count_scaled_mismatches); the message says how many are not.
::testing::AssertionResult all_scaled(const float* d_out, std::size_t n, std::uint64_t seed, float lo, float hi,
                                      float factor) {
  DeviceBuffer<unsigned long long> d_stats(std::vector<unsigned long long>{0ull, ~0ull});
  count_scaled_mismatches<<<4096, 256>>>(d_out, n, seed, lo, hi, factor, d_stats.data(), d_stats.data() + 1);
  CUDA_CHECK_LAST();
  const auto stats = d_stats.to_host();
  if (stats[0] == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << stats[0] << " of " << n << " elements are wrong (seed " << seed
                                       << "), the first at index " << stats[1]
                                       << (stats[1] >= (std::size_t{1} << 31) ? " (past 2^31: an int index?)" : "");
}

// --- Task 1: host flow ---------------------------------------------------------------------------

class VectorAddCorrectness : public cudalab::GpuTestWithParam<std::size_t> {};

TEST_P(VectorAddCorrectness, HostFlow) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  const Inputs in = make_inputs(n, kSeed + n);
  EXPECT_TRUE(AllEqual(in.expected, vector_add_host(in.a, in.b), kSeed + n));
}
class VectorAddMemoryCorrectness : public cudalab::GpuTest {};

// Every cudaMalloc needs its cudaFree: 24 calls on 16 MiB inputs would leak over 1 GiB otherwise.
TEST_F(VectorAddMemoryCorrectness, HostFlowFreesEverything) {
  const std::size_t n = std::size_t{1} << 22;
  const Inputs in = make_inputs(n, kSeed);
  // The first call may create the context's own allocations; it must also be right, or there is
  // nothing to measure.
  ASSERT_TRUE(AllEqual(in.expected, vector_add_host(in.a, in.b), kSeed));
  // The tally counts this process's own allocations, so another process on the GPU changes nothing.
  const cudalab::ResourceTally before = cudalab::resource_tally();
  for (int i = 0; i < 24; ++i) vector_add_host(in.a, in.b);
  const std::string kept = cudalab::held_beyond(before);
  EXPECT_TRUE(kept.empty()) << "24 more calls of vector_add_host kept " << kept;
}

// --- Task 2: one thread per element --------------------------------------------------------------

TEST_P(VectorAddCorrectness, OneThreadPerElement) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  const Inputs in = make_inputs(n, kSeed + 2 * n);
  const auto out = run_device(in, "c (vector_add)", [](const float* a, const float* b, float* c, std::size_t m) {
    vector_add(a, b, c, static_cast<int>(m));
  });
  EXPECT_TRUE(AllEqual(in.expected, out, kSeed + 2 * n));
}

// --- Task 3: grid-stride loop --------------------------------------------------------------------

struct GridCase {
  std::size_t n;
  int blocks, threads;
};
std::string grid_name(const ::testing::TestParamInfo<GridCase>& info) {
  return "n" + std::to_string(info.param.n) + "_grid" + std::to_string(info.param.blocks) + "_block" +
         std::to_string(info.param.threads);
}

class VectorAddGridStrideCorrectness : public cudalab::GpuTestWithParam<GridCase> {};

// Small grids force many passes: 100003 elements on 3 x 128 threads is 261 passes. A grid larger
// than n (64 x 256 for 1000) has threads with nothing to do; n = 0 must write nothing.
TEST_P(VectorAddGridStrideCorrectness, CoversEveryElement) {
  const GridCase c = GetParam();
  CUDALAB_SKIP_IF_LARGE(c.n);
  const Inputs in = make_inputs(c.n, kSeed + c.n + c.blocks);
  const auto out = run_device(in, "c (vector_add_grid_stride)", [&](const float* a, const float* b, float* d_c, std::size_t m) {
    vector_add_grid_stride(a, b, d_c, m, c.blocks, c.threads);
  });
  EXPECT_TRUE(AllEqual(in.expected, out, kSeed + c.n + c.blocks))
      << "grid of " << c.blocks << " blocks x " << c.threads << " threads, n = " << c.n;
}
INSTANTIATE_TEST_SUITE_P(, VectorAddGridStrideCorrectness,
                         ::testing::Values(GridCase{0, 4, 128}, GridCase{1, 1, 32}, GridCase{1000, 1, 1024},
                                           GridCase{1000, 2, 64}, GridCase{1000, 64, 256}, GridCase{5003, 3, 96},
                                           GridCase{100003, 3, 128}, GridCase{(1u << 22) + 5, 528, 256},
                                           GridCase{(1u << 24) + 7, 7, 1024}),
                         grid_name);

class VectorAddGridStrideOffsetCorrectness : public cudalab::GpuTestWithParam<GridCase> {};

// The arrays need not start where an allocation starts: a, b and c here begin kOffset floats into
// theirs (c's first kOffset floats and the kOffset after its end must stay as they were).
TEST_P(VectorAddGridStrideOffsetCorrectness, OffsetPointers) {
  constexpr std::size_t kOffset = 3;
  const GridCase c = GetParam();
  const std::size_t total = c.n + 2 * kOffset;
  const Inputs in = make_inputs(total, kSeed + 17 * c.n);
  DeviceBuffer<float> d_a(in.a), d_b(in.b);
  GuardedBuffer<float> d_c(total);
  cudalab::poison(d_c);
  vector_add_grid_stride(d_a.data() + kOffset, d_b.data() + kOffset, d_c.data() + kOffset, c.n, c.blocks, c.threads);
  EXPECT_TRUE(d_c.guards_intact("c"));
  std::vector<float> expected(total, cudalab::poison_value<float>());
  for (std::size_t i = kOffset; i < kOffset + c.n; ++i) expected[i] = in.expected[i];
  // Compared bit for bit: the poison is NaN, which never equals itself as a float.
  const auto bits = [](const std::vector<float>& v) {
    std::vector<std::uint32_t> u(v.size());
    if (!v.empty()) std::memcpy(u.data(), v.data(), v.size() * sizeof(float));
    return u;
  };
  EXPECT_TRUE(AllEqual(bits(expected), bits(d_c.to_host()), kSeed + 17 * c.n))
      << "c = d_c + " << kOffset << ", n = " << c.n << ": elements [0, " << kOffset << ") and [" << kOffset + c.n
      << ", " << total << ") of the allocation must keep the poison (as bits; 4294967295 is the poison)";
}
INSTANTIATE_TEST_SUITE_P(, VectorAddGridStrideOffsetCorrectness,
                         ::testing::Values(GridCase{1, 1, 32}, GridCase{1000, 2, 64}, GridCase{5003, 3, 96}),
                         grid_name);

class VectorAddGridStrideLaunchCorrectness : public cudalab::GpuTest {};

// A block of 2048 threads cannot launch: the error must reach the caller (CUDA_CHECK_LAST throws
// cudalab::CudaError), not stay pending for the next call to trip over.
TEST_F(VectorAddGridStrideLaunchCorrectness, ReportsBadLaunch) {
  const Inputs in = make_inputs(1000, kSeed + 19);
  DeviceBuffer<float> d_a(in.a), d_b(in.b);
  GuardedBuffer<float> d_c(in.a.size());
  EXPECT_TRUE(cudalab::launch_error_reported(
      [&] { vector_add_grid_stride(d_a.data(), d_b.data(), d_c.data(), in.a.size(), 4, 2048); },
      "vector_add_grid_stride(..., 4 blocks, 2048 threads per block)"));
}

class VectorAddHugeCorrectness : public cudalab::GpuTest {};

// Past 2^31 elements on a small grid (many passes): an int index wraps before reaching them.
// a and b are the same array (both are only read), so c = 2a; 16 GiB in all.
TEST_F(VectorAddHugeCorrectness, GridStrideBeyond2To31) {
  CUDALAB_SKIP_IF_LARGE(kHugeN);
  CUDALAB_SKIP_UNLESS_GPU_MEMORY(2 * kHugeN * sizeof(float));
  DeviceBuffer<float> d_a(kHugeN);
  GuardedBuffer<float> d_c(kHugeN);
  cudalab::random_fill(d_a.data(), kHugeN, kSeed + 31, 1.0f, 2.0f);
  cudalab::poison(d_c);
  vector_add_grid_stride(d_a.data(), d_a.data(), d_c.data(), kHugeN, 1056, 256);
  EXPECT_TRUE(d_c.guards_intact("c"));
  EXPECT_TRUE(all_scaled(d_c.data(), kHugeN, kSeed + 31, 1.0f, 2.0f, 2.0f)) << "a grid of 1056 x 256 threads";
}

// The challenge takes n as size_t too: 2^29 + 1000 float4s and a tail of 3; 16 GiB in all.
TEST_F(VectorAddHugeCorrectness, FastBeyond2To31) {
  CUDALAB_SKIP_IF_LARGE(kHugeN);
  CUDALAB_SKIP_UNLESS_GPU_MEMORY(2 * kHugeN * sizeof(float));
  DeviceBuffer<float> d_a(kHugeN);
  GuardedBuffer<float> d_c(kHugeN);
  cudalab::random_fill(d_a.data(), kHugeN, kSeed + 37, 1.0f, 2.0f);
  cudalab::poison(d_c);
  vector_add_fast(d_a.data(), d_a.data(), d_c.data(), kHugeN);
  EXPECT_TRUE(d_c.guards_intact("c"));
  EXPECT_TRUE(all_scaled(d_c.data(), kHugeN, kSeed + 37, 1.0f, 2.0f, 2.0f));
}

// --- Task 4: AoS and SoA -------------------------------------------------------------------------

class VectorAddAosCorrectness : public cudalab::GpuTestWithParam<std::size_t> {};

// The particles travel as 8 n floats (x, y, z, vx, vy, vz, mass, charge per particle): the same
// bytes as n Particles, compared float by float, so a wrong field shows as a wrong index. The array
// is guarded: scaling the x of a particle past the end fails too.
TEST_P(VectorAddAosCorrectness, ScalesOnlyX) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  static_assert(sizeof(Particle) == 8 * sizeof(float), "Particle is eight floats, unpadded");
  std::vector<float> fields = cudalab::random_vector<float>(8 * n, kSeed + 4 * n, 1.0f, 100.0f);
  const float s = 2.5f;

  GuardedBuffer<Particle> d_p(n);
  if (n > 0) CUDA_CHECK(cudaMemcpy(d_p.data(), fields.data(), d_p.bytes(), cudaMemcpyHostToDevice));
  scale_x_aos(d_p.data(), n, s);
  EXPECT_TRUE(d_p.guards_intact("the particles"));
  std::vector<float> actual(8 * n);
  if (n > 0) CUDA_CHECK(cudaMemcpy(actual.data(), d_p.data(), d_p.bytes(), cudaMemcpyDeviceToHost));

  for (std::size_t i = 0; i < n; ++i) fields[8 * i] *= s;  // x is field 0; the rest stay as they were
  EXPECT_TRUE(AllEqual(fields, actual, kSeed + 4 * n)) << "(8 floats per particle: x, y, z, vx, vy, vz, mass, charge)";
}
// A particle is 32 bytes: the largest size stops at 2^22 + 1 particles (128 MiB), still 16385 blocks.
// (2^31 particles would take 64 GiB: the int-index check is on the SoA kernel, which has no such cost.)
INSTANTIATE_TEST_SUITE_P(, VectorAddAosCorrectness,
                         ::testing::Values(0, 1, 2, 3, 5, 31, 255, 256, 257, 1000, 1025, (1u << 20) + 3, (1u << 22) + 1),
                         cudalab::SizeName());

TEST_P(VectorAddCorrectness, SoaScales) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  auto x = cudalab::random_vector<float>(n, kSeed + 5 * n, 1.0f, 100.0f);
  GuardedBuffer<float> d_x(x);
  scale_x_soa(d_x.data(), n, 2.5f);
  EXPECT_TRUE(d_x.guards_intact("x"));
  for (auto& v : x) v *= 2.5f;
  EXPECT_TRUE(AllEqual(x, d_x.to_host(), kSeed + 5 * n));
}

// 2^31 + 4003 floats (8 GiB): an int index turns negative past 2^31 and leaves the rest unscaled.
TEST_F(VectorAddHugeCorrectness, SoaBeyond2To31) {
  CUDALAB_SKIP_IF_LARGE(kHugeN);
  CUDALAB_SKIP_UNLESS_GPU_MEMORY(kHugeN * sizeof(float));
  GuardedBuffer<float> d_x(kHugeN);
  cudalab::random_fill(d_x.data(), kHugeN, kSeed + 41, 1.0f, 100.0f);
  scale_x_soa(d_x.data(), kHugeN, 2.5f);
  EXPECT_TRUE(d_x.guards_intact("x"));
  EXPECT_TRUE(all_scaled(d_x.data(), kHugeN, kSeed + 41, 1.0f, 100.0f, 2.5f));
}

// --- Task 5: pinned memory -----------------------------------------------------------------------

class VectorAddPinnedCorrectness : public cudalab::GpuTest {};

// The type CUDA reports for a host address: cudaMemoryTypeHost for page-locked memory it knows.
cudaMemoryType memory_type(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError();  // an address CUDA does not know: not pinned
    return cudaMemoryTypeUnregistered;
  }
  return attr.type;
}

TEST_F(VectorAddPinnedCorrectness, AllocationIsPageLocked) {
  const std::size_t n = std::size_t{1} << 20;
  float* h = allocate_pinned(n);
  ASSERT_NE(h, nullptr) << "allocate_pinned returned nullptr";
  EXPECT_EQ(memory_type(h), cudaMemoryTypeHost)
      << "the pointer is not page-locked host memory: use cudaMallocHost, not malloc or new";
  // All n floats must be pinned, not only the first n bytes: checked before anything is written there.
  ASSERT_EQ(memory_type(h + n / 4), cudaMemoryTypeHost)
      << "float " << n / 4 << " of " << n << " is not in the pinned allocation: allocate n * sizeof(float) bytes";
  ASSERT_EQ(memory_type(h + n - 1), cudaMemoryTypeHost)
      << "the last of the " << n << " floats is not in the pinned allocation: allocate n * sizeof(float) bytes";
  for (std::size_t i = 0; i < n; ++i) h[i] = static_cast<float>(i % 1000) + 0.5f;
  DeviceBuffer<float> d(n);
  CUDA_CHECK(cudaMemcpy(d.data(), h, n * sizeof(float), cudaMemcpyHostToDevice));
  const auto back = d.to_host();
  EXPECT_EQ(back[n - 1], static_cast<float>((n - 1) % 1000) + 0.5f);
  free_pinned(h);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// free_pinned gives the memory back: afterwards CUDA no longer knows the address as pinned memory.
TEST_F(VectorAddPinnedCorrectness, FreeReleasesTheAllocation) {
  const std::size_t n = std::size_t{1} << 20;
  float* h = allocate_pinned(n);
  ASSERT_NE(h, nullptr) << "allocate_pinned returned nullptr";
  ASSERT_EQ(memory_type(h), cudaMemoryTypeHost) << "allocate_pinned must return page-locked memory";
  free_pinned(h);
  EXPECT_NE(memory_type(h), cudaMemoryTypeHost)
      << "the memory is still pinned after free_pinned: release it with cudaFreeHost";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// --- Challenge: fast ------------------------------------------------------------------------------

TEST_P(VectorAddCorrectness, Fast) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  const Inputs in = make_inputs(n, kSeed + 6 * n);
  const auto out = run_device(in, "c (vector_add_fast)",
                              [](const float* a, const float* b, float* c, std::size_t m) { vector_add_fast(a, b, c, m); });
  EXPECT_TRUE(AllEqual(in.expected, out, kSeed + 6 * n));
}
INSTANTIATE_TEST_SUITE_P(, VectorAddCorrectness, ::testing::ValuesIn(kSizes), cudalab::SizeName());

// --- Perf ----------------------------------------------------------------------------------------

class VectorAddPerf : public cudalab::GpuTestWithParam<std::size_t> {};

// GB/s = 12 N / t (two inputs read, one output written), against thrust::transform and a
// device-to-device cudaMemcpy moving the same 12 N bytes.
// The inputs are made on the GPU and the output is checked there against thrust's, before timing and
// after every timed call: at 2^28 elements host-side inputs and comparisons would take seconds.
TEST_P(VectorAddPerf, Fast) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  const std::size_t n = GetParam();
  DeviceBuffer<float> d_ab(2 * n), d_c(n), d_expected(n), d_copy(n + n / 2);
  cudalab::random_fill(d_ab.data(), n, kSeed + 7, 1.0f, 2.0f);
  cudalab::random_fill(d_ab.data() + n, n, kSeed + 8, 10.0f, 20.0f);
  const float* d_a = d_ab.data();
  const float* d_b = d_ab.data() + n;
  thrust::transform(thrust::device, d_a, d_a + n, d_b, d_expected.data(), thrust::plus<float>());
  // Counts the elements that differ in one pass (thrust::equal searches in 2^20-element pieces, a sync
  // each): it also checks every timed call.
  auto matches = [&] {
    CUDA_CHECK(cudaDeviceSynchronize());
    return thrust::inner_product(thrust::device, d_c.data(), d_c.data() + n, d_expected.data(), std::size_t{0},
                                 thrust::plus<std::size_t>(), thrust::not_equal_to<float>()) == 0;
  };

  cudalab::poison(d_c);
  vector_add_fast(d_a, d_b, d_c.data(), n);
  if (!matches()) CUDALAB_SKIP("vector_add_fast is incorrect at this size: not timed");
  cudalab::poison(d_c);
  vector_add(d_a, d_b, d_c.data(), static_cast<int>(n));
  const bool simple_ok = matches();

  const double bytes = 12.0 * n;
  cudalab::bench::Suite suite(cudalab::bench::Work::bytes(bytes), cudalab::bench::size_label(n));
  // Before every impl call: a, b and the expected sum negated in place (exact in float) and c poisoned,
  // so an answer kept from the previous call, or none at all, fails verify.
  suite.add("impl", [&] { vector_add_fast(d_a, d_b, d_c.data(), n); })
      .prepare([&](int) {
        thrust::transform(thrust::device, d_ab.data(), d_ab.data() + 2 * n, d_ab.data(), thrust::negate<float>());
        thrust::transform(thrust::device, d_expected.data(), d_expected.data() + n, d_expected.data(),
                          thrust::negate<float>());
        cudalab::poison(d_c);
      })
      .verify([&](int) { return matches(); });
  suite.add("thrust", [&] { thrust::transform(thrust::device, d_a, d_a + n, d_b, d_c.data(), thrust::plus<float>()); });
  suite.add("memcpy", [&] { CUDA_CHECK(cudaMemcpyAsync(d_copy.data(), d_ab.data(), 6 * n, cudaMemcpyDeviceToDevice)); });
  if (simple_ok) suite.add("one_per_thread", [&] { vector_add(d_a, d_b, d_c.data(), static_cast<int>(n)); });
  suite.baseline("thrust").floor_ms(cudalab::bench::copy_floor_ms(bytes));
  suite.run();
  suite.record();
}
INSTANTIATE_TEST_SUITE_P(, VectorAddPerf, ::testing::Values(std::size_t{1} << 24, std::size_t{1} << 28), cudalab::SizeName());

class VectorAddExtrasPerf : public cudalab::GpuTest {};

// Useful bytes only (x read and written): the AoS kernel moves 8x more than it needs.
// Copies every k-th element of a device array to the host (a strided 2D copy of one-element rows).
template <class T>
std::vector<T> every_kth(const DeviceBuffer<T>& d, std::size_t k) {
  std::vector<T> h(d.size() / k);
  CUDA_CHECK(cudaMemcpy2D(h.data(), sizeof(T), d.data(), k * sizeof(T), sizeof(T), h.size(), cudaMemcpyDeviceToHost));
  return h;
}

TEST_F(VectorAddExtrasPerf, AosVersusSoa) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  const std::size_t n = std::size_t{1} << 24;
  constexpr std::size_t kSample = 4099;  // a spot check: the correctness tests judge every element
  const Particle p0{1.5f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f, 0.75f};
  DeviceBuffer<Particle> d_p(n);
  DeviceBuffer<float> d_x(n);
  thrust::fill_n(thrust::device, d_p.data(), n, p0);
  cudalab::random_fill(d_x.data(), n, kSeed, 1.0f, 2.0f);

  // Time only what is correct: one scaling by 2 must double x (and nothing else) in both layouts.
  const std::vector<float> x_before = every_kth(d_x, kSample);
  scale_x_soa(d_x.data(), n, 2.0f);
  scale_x_aos(d_p.data(), n, 2.0f);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<float> x_after = every_kth(d_x, kSample);
  const std::vector<Particle> p_after = every_kth(d_p, kSample);
  for (std::size_t i = 0; i < x_after.size(); ++i) {
    if (x_after[i] != 2.0f * x_before[i]) CUDALAB_SKIP("scale_x_soa is incorrect: not timed");
    if (p_after[i].x != 3.0f || p_after[i].y != 0.75f) CUDALAB_SKIP("scale_x_aos is incorrect: not timed");
  }
  cudalab::bench::Suite suite(cudalab::bench::Work::bytes(8.0 * n), "N = 2^24 particles");
  // Scaling by 1 leaves x as it was: the same spot check after every call (unscored, so no prepare).
  suite.add("impl", [&] { scale_x_soa(d_x.data(), n, 1.0f); }).verify([&](int) {
    return every_kth(d_x, kSample) == x_after;
  });
  suite.add("aos", [&] { scale_x_aos(d_p.data(), n, 1.0f); });
  suite.run();
  suite.record();
}

// Host-to-device copy of 64 MiB from pinned (the student's allocate_pinned) and pageable memory.
TEST_F(VectorAddExtrasPerf, PinnedVersusPageableUpload) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  const std::size_t n = std::size_t{1} << 24;
  float* h_pinned = allocate_pinned(n);
  if (h_pinned == nullptr) CUDALAB_SKIP("allocate_pinned is not implemented: not timed");
  std::vector<float> h_pageable(n, 1.0f);
  std::fill(h_pinned, h_pinned + n, 1.0f);
  DeviceBuffer<float> d(n);
  cudalab::bench::Options options;
  options.flush_l2 = false;
  options.max_seconds = 0.25;  // pageable copies are noisy: a quarter second of rounds settles the median
  cudalab::bench::Suite suite(cudalab::bench::Work::bytes(4.0 * n), "64 MiB host to device", options);
  suite.add("impl", [&] { CUDA_CHECK(cudaMemcpy(d.data(), h_pinned, 4 * n, cudaMemcpyHostToDevice)); });
  suite.add("pageable", [&] { CUDA_CHECK(cudaMemcpy(d.data(), h_pageable.data(), 4 * n, cudaMemcpyHostToDevice)); });
  suite.run();
  suite.record();
  free_pinned(h_pinned);
}

}  // namespace
