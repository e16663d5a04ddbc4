// Lab 01 tests. Correctness tests judge; the perf test only measures (it is informational).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <cudalab/bench.cuh>
#include <cudalab/check.cuh>
#include <cudalab/compare.hpp>
#include <cudalab/device_buffer.cuh>
#include <cudalab/gtest_cuda.hpp>
#include <cudalab/random.hpp>

#include "hello.cuh"

namespace {

using cudalab::AllEqual;
using cudalab::DeviceBuffer;

constexpr std::uint64_t kSeed = 1001;

struct Grid {
  int blocks, threads;
};
void PrintTo(const Grid& g, std::ostream* os) { *os << g.blocks << " blocks x " << g.threads << " threads"; }

std::string grid_name(const ::testing::TestParamInfo<Grid>& info) {
  return std::to_string(info.param.blocks) + "x" + std::to_string(info.param.threads);
}

std::string error_name(cudaError_t e) { return cudaGetErrorName(e); }

// --- Task 1: hello, GPU --------------------------------------------------------------------------

class HelloCorrectness : public cudalab::GpuTestWithParam<Grid> {};

// Captures what say_hello prints. Device printf output reaches stdout only when the host waits for
// the GPU, so a say_hello that returns without synchronizing leaves the capture empty.
TEST_P(HelloCorrectness, PrintsOneLinePerThread) {
  const Grid g = GetParam();
  std::string error;
  std::fflush(stdout);
  ::testing::internal::CaptureStdout();
  try {
    say_hello(g.blocks, g.threads);
  } catch (const std::exception& e) {
    error = e.what();  // finish the capture first: an exception must not leave stdout redirected
  }
  std::fflush(stdout);
  const std::string out = ::testing::internal::GetCapturedStdout();
  // Flush any lines an unsynchronized say_hello left on the device, so they cannot land in the next
  // test's capture.
  cudaDeviceSynchronize();
  ASSERT_TRUE(error.empty()) << "say_hello threw: " << error;

  std::map<std::string, int> seen;
  std::istringstream lines(out);
  int total = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("hello from", 0) == 0) {
      ++seen[line];
      ++total;
    }
  }
  std::ostringstream problems;
  int wrong = 0;
  for (int b = 0; b < g.blocks; ++b) {
    for (int t = 0; t < g.threads; ++t) {
      const std::string expected = "hello from block " + std::to_string(b) + ", thread " + std::to_string(t);
      const int count = seen.count(expected) ? seen[expected] : 0;
      if (count != 1 && ++wrong <= 4) problems << "  \"" << expected << "\" printed " << count << " times\n";
    }
  }
  const int expected_total = g.blocks * g.threads;
  EXPECT_TRUE(wrong == 0 && total == expected_total)
      << "expected " << expected_total << " lines \"hello from block B, thread T\" (one per thread), captured "
      << total << (total == 0 ? " (none: does say_hello wait with cudaDeviceSynchronize before returning?)" : "")
      << "\n"
      << problems.str();
}
INSTANTIATE_TEST_SUITE_P(, HelloCorrectness,
                         ::testing::Values(Grid{1, 1}, Grid{2, 4}, Grid{3, 33}, Grid{5, 64}), grid_name);

class HelloTickCorrectness : public cudalab::GpuTest {};

TEST_F(HelloTickCorrectness, AddsOnePerCall) {
  DeviceBuffer<unsigned int> d_counter(std::vector<unsigned int>{1000u});
  for (int i = 0; i < 7; ++i) tick(d_counter.data());
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(d_counter.to_host()[0], 1007u) << "the counter started at 1000 and tick ran 7 times";
}

// --- Task 2: a record per thread -----------------------------------------------------------------

class HelloRecordCorrectness : public cudalab::GpuTestWithParam<Grid> {};

TEST_P(HelloRecordCorrectness, EveryThreadWritesItsRecord) {
  const Grid g = GetParam();
  const std::size_t n = static_cast<std::size_t>(g.blocks) * g.threads;
  CUDALAB_SKIP_IF_LARGE(n);
  DeviceBuffer<ThreadRecord> d_records(n);
  cudalab::poison(d_records);  // 0xA5A5A5A5 in every field: a record nobody wrote cannot pass
  record_threads(d_records.data(), g.blocks, g.threads);
  CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<ThreadRecord> records = d_records.to_host();

  std::vector<int> expected(3 * n), actual(3 * n);
  for (std::size_t i = 0; i < n; ++i) {
    expected[3 * i + 0] = static_cast<int>(i) / g.threads;
    expected[3 * i + 1] = static_cast<int>(i) % g.threads;
    expected[3 * i + 2] = static_cast<int>(i);
    actual[3 * i + 0] = records[i].block;
    actual[3 * i + 1] = records[i].thread;
    actual[3 * i + 2] = records[i].global;
  }
  EXPECT_TRUE(AllEqual(expected, actual, kSeed, cudalab::Shape2D{n, 3}))
      << "(row = record index, columns = block, thread, global) for " << g.blocks << " blocks x " << g.threads
      << " threads";
}
INSTANTIATE_TEST_SUITE_P(, HelloRecordCorrectness,
                         ::testing::Values(Grid{1, 1}, Grid{1, 32}, Grid{4, 33}, Grid{7, 255}, Grid{100, 256},
                                           Grid{3, 1024}, Grid{4096, 256}),
                         grid_name);

// --- Task 3: device facts ------------------------------------------------------------------------

class HelloDeviceCorrectness : public cudalab::GpuTest {};

int attribute(cudaDeviceAttr attr, int device) {
  int v = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&v, attr, device));
  return v;
}

// The test asks the runtime itself and compares field by field.
TEST_F(HelloDeviceCorrectness, FactsMatchTheDevice) {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  const DeviceFacts f = query_device(device);

  EXPECT_EQ(f.name, std::string(prop.name)) << "name: cudaDeviceProp::name";
  EXPECT_EQ(f.cc_major, attribute(cudaDevAttrComputeCapabilityMajor, device)) << "cc_major";
  EXPECT_EQ(f.cc_minor, attribute(cudaDevAttrComputeCapabilityMinor, device)) << "cc_minor";
  EXPECT_EQ(f.sm_count, attribute(cudaDevAttrMultiProcessorCount, device)) << "sm_count";
  EXPECT_EQ(f.sm_clock_khz, attribute(cudaDevAttrClockRate, device))
      << "sm_clock_khz: cudaDeviceGetAttribute(&v, cudaDevAttrClockRate, device), in kHz";
  EXPECT_EQ(f.memory_clock_khz, attribute(cudaDevAttrMemoryClockRate, device))
      << "memory_clock_khz: cudaDevAttrMemoryClockRate, in kHz";
  EXPECT_EQ(f.memory_bus_bits, attribute(cudaDevAttrGlobalMemoryBusWidth, device))
      << "memory_bus_bits: cudaDevAttrGlobalMemoryBusWidth";
  EXPECT_EQ(f.global_memory_bytes, prop.totalGlobalMem) << "global_memory_bytes: bytes, not MiB";
  EXPECT_EQ(f.l2_cache_bytes, attribute(cudaDevAttrL2CacheSize, device)) << "l2_cache_bytes";
  EXPECT_EQ(f.warp_size, attribute(cudaDevAttrWarpSize, device)) << "warp_size";
  EXPECT_EQ(f.max_threads_per_block, attribute(cudaDevAttrMaxThreadsPerBlock, device)) << "max_threads_per_block";
  EXPECT_EQ(f.max_threads_per_sm, attribute(cudaDevAttrMaxThreadsPerMultiProcessor, device))
      << "max_threads_per_sm";
  EXPECT_EQ(f.shared_memory_per_block_optin,
            static_cast<std::size_t>(attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, device)))
      << "shared_memory_per_block_optin: sharedMemPerBlockOptin, not sharedMemPerBlock";
}

// A device that does not exist must raise an error, not return zeros: every call goes through CUDA_CHECK.
TEST_F(HelloDeviceCorrectness, NonexistentDeviceThrows) {
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  EXPECT_THROW(query_device(count), cudalab::CudaError)
      << "query_device(" << count << ") should throw: there are only " << count << " devices";
  cudaGetLastError();  // the expected failure is recorded as the last error; clear it
}

// Pure arithmetic, no GPU needed: the H100 SXM and H200 datasheet figures.
TEST(HelloBandwidthCorrectness, PeakFromClockAndBus) {
  DeviceFacts h100;
  h100.memory_clock_khz = 2619000;
  h100.memory_bus_bits = 5120;
  DeviceFacts h200;
  h200.memory_clock_khz = 3201000;
  h200.memory_bus_bits = 6016;
  EXPECT_TRUE(cudalab::Near(3352.32, peak_dram_bandwidth_gbps(h100), {1e-9, 1e-9}, 0))
      << "2619 MHz x 2 transfers x 5120 bits / 8 = 3352.32 GB/s";
  EXPECT_TRUE(cudalab::Near(4814.304, peak_dram_bandwidth_gbps(h200), {1e-9, 1e-9}, 0))
      << "3201 MHz x 2 transfers x 6016 bits / 8 = 4814.304 GB/s";
}

// --- Task 4: catching a bad launch ---------------------------------------------------------------

class HelloLaunchCorrectness : public cudalab::GpuTest {};

__global__ void probe_kernel(int* out) { out[threadIdx.x] = 1; }

// What the runtime itself reports for a launch of this shape: the test's own kernel, launched the same
// way, read back (and cleared) with cudaGetLastError. CUDA 13.0 says cudaErrorInvalidValue for both bad
// shapes below; older toolkits typically said cudaErrorInvalidConfiguration. The test accepts whatever this
// runtime says, as long as it is an error.
cudaError_t runtime_verdict(int* d_out, int blocks, int threads) {
  probe_kernel<<<blocks, threads>>>(d_out);
  return cudaGetLastError();
}

void expect_launch_error_reported(int blocks, int threads, const char* why) {
  DeviceBuffer<int> d_out(2048);
  cudalab::poison(d_out);
  const cudaError_t expected = runtime_verdict(d_out.data(), blocks, threads);
  ASSERT_NE(expected, cudaSuccess) << "this runtime accepted a launch of " << blocks << " x " << threads;
  const cudaError_t err = fill_checked(d_out.data(), 1000, blocks, threads);
  const cudaError_t pending = cudaGetLastError();
  EXPECT_EQ(err, expected) << why << ": the runtime reports " << error_name(expected) << " for "
                           << blocks << " x " << threads << ", and fill_checked returned " << error_name(err);
  EXPECT_EQ(pending, cudaSuccess) << "fill_checked left " << error_name(pending)
                                  << " pending: read it with cudaGetLastError(), which also clears it";
}

TEST_F(HelloLaunchCorrectness, TooManyThreadsIsReported) {
  expect_launch_error_reported(1, 2048, "a block holds at most 1024 threads");
}

TEST_F(HelloLaunchCorrectness, ZeroBlocksIsReported) {
  expect_launch_error_reported(0, 256, "a grid needs at least one block");
}

TEST_F(HelloLaunchCorrectness, GoodLaunchRunsAndReportsSuccess) {
  const Grid grids[] = {{1, 1}, {4, 256}, {3, 1000}, {1, 1024}};
  for (const Grid g : grids) {
    const int n = g.blocks * g.threads;
    DeviceBuffer<int> d_out(n);
    cudalab::poison(d_out);
    const cudaError_t err = fill_checked(d_out.data(), 1000, g.blocks, g.threads);
    EXPECT_EQ(err, cudaSuccess) << g.blocks << " x " << g.threads << " is a valid launch, got " << error_name(err);
    std::vector<int> expected(n);
    for (int i = 0; i < n; ++i) expected[i] = 1000 + i;
    EXPECT_TRUE(AllEqual(expected, d_out.to_host(), kSeed))
        << "after fill_checked(d_out, 1000, " << g.blocks << ", " << g.threads << ") returned";
  }
}

// --- Task 5: one function, two processors --------------------------------------------------------

// The test's own reference, in 64-bit arithmetic.
int reference_steps(std::uint32_t n) {
  std::uint64_t v = n;
  int steps = 0;
  while (v != 1) {
    v = (v % 2 == 0) ? v / 2 : 3 * v + 1;
    ++steps;
  }
  return steps;
}

// Known values, including trajectories that climb past 2^32 (8400511 peaks at 159424614880) and
// 4294967295, whose first step already needs 34 bits.
const std::vector<std::uint32_t> kKnownInputs = {1, 2, 3, 6, 7, 27, 97, 871, 837799, 8400511, 4294967295u};
const std::vector<int> kKnownSteps = {0, 1, 7, 8, 16, 111, 118, 178, 524, 685, 451};

std::vector<std::uint32_t> collatz_inputs() {
  auto n = cudalab::random_vector<std::uint32_t>(10007, kSeed, 1, 10000000);
  n.insert(n.end(), kKnownInputs.begin(), kKnownInputs.end());
  return n;
}

// Host only: runs without a GPU.
TEST(HelloCollatzHostCorrectness, OnHost) {
  std::vector<int> actual;
  for (std::uint32_t n : kKnownInputs) actual.push_back(collatz_steps(n));
  EXPECT_TRUE(AllEqual(kKnownSteps, actual, 0)) << "inputs 1, 2, 3, 6, 7, 27, 97, 871, 837799, 8400511, 4294967295";
  const auto inputs = collatz_inputs();
  std::vector<int> expected, got;
  for (std::uint32_t n : inputs) {
    expected.push_back(reference_steps(n));
    got.push_back(collatz_steps(n));
  }
  EXPECT_TRUE(AllEqual(expected, got, kSeed));
}

class HelloCollatzCorrectness : public cudalab::GpuTest {};

TEST_F(HelloCollatzCorrectness, OnDevice) {
  const auto inputs = collatz_inputs();
  std::vector<int> expected;
  for (std::uint32_t n : inputs) expected.push_back(reference_steps(n));
  DeviceBuffer<std::uint32_t> d_n(inputs);
  DeviceBuffer<int> d_steps(inputs.size());
  cudalab::poison(d_steps);
  collatz_steps_on_device(d_n.data(), d_steps.data(), static_cast<int>(inputs.size()));
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(AllEqual(expected, d_steps.to_host(), kSeed))
      << "(the last " << kKnownInputs.size() << " inputs are 1, 2, 3, 6, 7, 27, 97, 871, 837799, 8400511, 4294967295)";
}

// --- Perf (informational) ------------------------------------------------------------------------

__global__ void empty_kernel() {}

class HelloPerf : public cudalab::GpuTest {};

// Time for 100 launches back to back (divide by 100 for one launch): the student's tick, an empty
// kernel, and tick followed by cudaDeviceSynchronize each time (a round trip per launch).
TEST_F(HelloPerf, LaunchLatency) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  constexpr int kLaunches = 100;
  DeviceBuffer<unsigned int> d_counter(std::vector<unsigned int>{0u});
  for (int i = 0; i < 3; ++i) tick(d_counter.data());
  CUDA_CHECK(cudaDeviceSynchronize());
  if (d_counter.to_host()[0] != 3u) CUDALAB_SKIP("tick is incorrect: not timed");

  cudalab::bench::Options options;
  options.flush_l2 = false;  // nothing here touches memory worth evicting
  cudalab::bench::Suite suite(cudalab::bench::Work::time_only(), "100 back-to-back launches", options);
  suite.add("impl", [&] {
    for (int i = 0; i < kLaunches; ++i) tick(d_counter.data());
  });
  suite.add("empty_kernel", [&] {
    for (int i = 0; i < kLaunches; ++i) empty_kernel<<<1, 1>>>();
  });
  suite.add("sync_each", [&] {
    for (int i = 0; i < kLaunches; ++i) {
      tick(d_counter.data());
      CUDA_CHECK(cudaDeviceSynchronize());
    }
  });
  suite.baseline("empty_kernel");
  suite.run();
  suite.record();
}

}  // namespace
