// Lab 01 tests. Correctness tests judge; the perf test only measures (it is informational).
#include <gtest/gtest.h>

#include <algorithm>
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
#include <cudalab/guarded_buffer.cuh>
#include <cudalab/random.hpp>

#include "hello.cuh"

namespace {

using cudalab::AllEqual;
using cudalab::DeviceBuffer;
using cudalab::GuardedBuffer;

constexpr std::uint64_t kSeed = 1001;

struct Grid {
  int blocks, threads;
};
void PrintTo(const Grid& g, std::ostream* os) { *os << g.blocks << " blocks x " << g.threads << " threads"; }

std::string grid_name(const ::testing::TestParamInfo<Grid>& info) {
  return "grid" + std::to_string(info.param.blocks) + "_block" + std::to_string(info.param.threads);
}

std::string error_name(cudaError_t e) { return cudaGetErrorName(e); }

// More threads than a block may hold (1024 on every current GPU): a launch the runtime refuses.
constexpr int kTooManyThreads = 2048;

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

class HelloCheckedCorrectness : public cudalab::GpuTest {};

// say_hello checks its launch: a block of 2048 threads never runs, and the error must not go unseen.
TEST_F(HelloCheckedCorrectness, SayHelloThrowsOnABadLaunch) {
  std::string thrown, other;
  std::fflush(stdout);
  ::testing::internal::CaptureStdout();  // a wrong launch that does run must not flood the log
  try {
    say_hello(1, kTooManyThreads);
  } catch (const cudalab::CudaError& e) {
    thrown = e.what();
  } catch (const std::exception& e) {
    other = e.what();  // finish the capture first: an exception must not leave stdout redirected
  }
  const cudaError_t pending = cudaGetLastError();  // read (and clear) what an unchecked launch left behind
  cudaDeviceSynchronize();
  std::fflush(stdout);
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(other.empty()) << "say_hello threw: " << other;
  EXPECT_FALSE(thrown.empty()) << "say_hello(1, " << kTooManyThreads << ") is a launch the runtime refuses, and it "
                               << "returned normally: check the launch with CUDA_CHECK_LAST()";
  EXPECT_EQ(pending, cudaSuccess) << "say_hello left " << error_name(pending)
                                  << " pending: a launch error must be read with cudaGetLastError()";
  EXPECT_EQ(out.find("hello from"), std::string::npos) << "a launch that cannot run printed lines";
}

class HelloTickCorrectness : public cudalab::GpuTest {};

// The counter sits in a guarded buffer: tick must add to it, and touch nothing beside it.
TEST_F(HelloTickCorrectness, AddsOnePerCall) {
  GuardedBuffer<unsigned int> d_counter(std::vector<unsigned int>{1000u});
  for (int i = 0; i < 7; ++i) tick(d_counter.data());
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(d_counter.to_host()[0], 1007u) << "the counter started at 1000 and tick ran 7 times";
  EXPECT_TRUE(d_counter.guards_intact("the counter"));
}

// --- Task 2: a record per thread -----------------------------------------------------------------

class HelloRecordCorrectness : public cudalab::GpuTestWithParam<Grid> {};

TEST_P(HelloRecordCorrectness, EveryThreadWritesItsRecord) {
  const Grid g = GetParam();
  const std::size_t n = static_cast<std::size_t>(g.blocks) * g.threads;
  CUDALAB_SKIP_IF_LARGE(n);
  GuardedBuffer<ThreadRecord> d_records(n);
  cudalab::poison(d_records);  // 0xA5A5A5A5 in every field: a record nobody wrote cannot pass
  record_threads(d_records.data(), g.blocks, g.threads);
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(d_records.guards_intact("the records"));
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

class HelloRecordCheckedCorrectness : public cudalab::GpuTest {};

// "Returns after the launch is checked": a launch that cannot run throws, and writes nothing.
TEST_F(HelloRecordCheckedCorrectness, ThrowsOnABadLaunch) {
  GuardedBuffer<ThreadRecord> d_records(kTooManyThreads);
  cudalab::poison(d_records);
  EXPECT_TRUE(cudalab::launch_error_reported([&] { record_threads(d_records.data(), 1, kTooManyThreads); },
                                             "record_threads(d, 1, " + std::to_string(kTooManyThreads) + ")"));
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(d_records.guards_intact("the records"));
  const std::vector<ThreadRecord> records = d_records.to_host();
  const int poison = cudalab::poison_value<int>();
  const auto written = std::count_if(records.begin(), records.end(), [&](const ThreadRecord& r) {
    return r.block != poison || r.thread != poison || r.global != poison;
  });
  EXPECT_EQ(written, 0) << "records were written by a launch that should never have run";
}

// --- Task 3: device facts ------------------------------------------------------------------------

class HelloDeviceCorrectness : public cudalab::GpuTest {};

int attribute(cudaDeviceAttr attr, int device) {
  int v = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&v, attr, device));
  return v;
}

// The test asks the runtime itself and compares field by field, on every device of the machine, so a
// query_device that ignores its argument fails wherever there are several.
TEST_F(HelloDeviceCorrectness, FactsMatchTheDevice) {
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  for (int device = 0; device < count; ++device) {
    SCOPED_TRACE("device " + std::to_string(device));
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
}

// A device that does not exist must raise an error, not return zeros: every call goes through CUDA_CHECK.
TEST_F(HelloDeviceCorrectness, NonexistentDeviceThrows) {
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  for (const int device : {count, -1}) {
    EXPECT_THROW(query_device(device), cudalab::CudaError)
        << "query_device(" << device << ") should throw: the devices are numbered 0 to " << count - 1;
    cudaGetLastError();  // the expected failure is recorded as the last error; clear it
  }
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
  DeviceFacts a100;
  a100.memory_clock_khz = 1215000;
  a100.memory_bus_bits = 5120;
  EXPECT_TRUE(cudalab::Near(1555.2, peak_dram_bandwidth_gbps(a100), {1e-9, 1e-9}, 0))
      << "1215 MHz x 2 transfers x 5120 bits / 8 = 1555.2 GB/s";
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

// Nothing may be written by a launch that never ran: the output keeps its poison and its guards.
void expect_untouched(const GuardedBuffer<int>& d_out, const std::string& what) {
  EXPECT_TRUE(d_out.guards_intact("the output"));
  const std::vector<int> out = d_out.to_host();
  EXPECT_TRUE(AllEqual(std::vector<int>(out.size(), cudalab::poison_value<int>()), out, kSeed))
      << what << " never runs, yet elements of the output changed";
}

void expect_launch_error_reported(int blocks, int threads, const char* why) {
  GuardedBuffer<int> d_out(2048);
  cudalab::poison(d_out);
  const cudaError_t expected = runtime_verdict(d_out.data(), blocks, threads);
  ASSERT_NE(expected, cudaSuccess) << "this runtime accepted a launch of " << blocks << " x " << threads;
  const cudaError_t err = fill_checked(d_out.data(), 1000, blocks, threads);
  const cudaError_t pending = cudaGetLastError();
  EXPECT_EQ(err, expected) << why << ": the runtime reports " << error_name(expected) << " for "
                           << blocks << " x " << threads << ", and fill_checked returned " << error_name(err);
  EXPECT_EQ(pending, cudaSuccess) << "fill_checked left " << error_name(pending)
                                  << " pending: read it with cudaGetLastError(), which also clears it";
  expect_untouched(d_out, "a launch of " + std::to_string(blocks) + " x " + std::to_string(threads));
}

TEST_F(HelloLaunchCorrectness, TooManyThreadsIsReported) {
  expect_launch_error_reported(1, kTooManyThreads, "a block holds at most 1024 threads");
}

TEST_F(HelloLaunchCorrectness, ZeroBlocksIsReported) {
  expect_launch_error_reported(0, 256, "a grid needs at least one block");
}

TEST_F(HelloLaunchCorrectness, GoodLaunchRunsAndReportsSuccess) {
  const Grid grids[] = {{1, 1}, {4, 256}, {3, 1000}, {1, 1024}};
  for (const Grid g : grids) {
    const int n = g.blocks * g.threads;
    GuardedBuffer<int> d_out(n);
    cudalab::poison(d_out);
    const cudaError_t err = fill_checked(d_out.data(), 1000, g.blocks, g.threads);
    EXPECT_EQ(err, cudaSuccess) << g.blocks << " x " << g.threads << " is a valid launch, got " << error_name(err);
    std::vector<int> expected(n);
    for (int i = 0; i < n; ++i) expected[i] = 1000 + i;
    EXPECT_TRUE(AllEqual(expected, d_out.to_host(), kSeed))
        << "after fill_checked(d_out, 1000, " << g.blocks << ", " << g.threads << ") returned";
    EXPECT_TRUE(d_out.guards_intact("the output"));
  }
}

// Keeps the GPU busy for `cycles` SM clock cycles: work queued behind it on the same stream waits.
__global__ void busy_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// Pinned host memory that the GPU writes directly (mapped): the host can read it without any
// synchronization of its own, so it shows what the GPU had written at that moment.
class MappedInts {
 public:
  explicit MappedInts(int n) : n_(n) {
    CUDA_CHECK(cudaHostAlloc(&host_, n * sizeof(int), cudaHostAllocMapped));
    CUDA_CHECK(cudaHostGetDevicePointer(&device_, host_, 0));
  }
  MappedInts(const MappedInts&) = delete;
  MappedInts& operator=(const MappedInts&) = delete;
  ~MappedInts() { cudaFreeHost(host_); }
  int* host() { return host_; }
  int* device() { return device_; }
  std::vector<int> read() const { return std::vector<int>(host_, host_ + n_); }

 private:
  int n_;
  int* host_ = nullptr;
  int* device_ = nullptr;
};

// "Otherwise waits for the kernel": the GPU is kept busy for a while first, so a fill_checked that
// returns without waiting returns long before its kernel has run. Its output lives in mapped host
// memory and is read right after the call, with no synchronization of the test's own.
TEST_F(HelloLaunchCorrectness, GoodLaunchHasFinishedWhenItReturns) {
  constexpr int kBlocks = 4, kThreads = 256, kN = kBlocks * kThreads;
  constexpr long long kBusyMs = 100;
  MappedInts out(kN);
  std::fill(out.host(), out.host() + kN, cudalab::poison_value<int>());
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  const long long cycles = static_cast<long long>(attribute(cudaDevAttrClockRate, device)) * kBusyMs;  // kHz x ms
  busy_kernel<<<1, 1>>>(cycles);
  CUDA_CHECK_LAST();
  const cudaError_t err = fill_checked(out.device(), 1000, kBlocks, kThreads);
  const std::vector<int> seen = out.read();  // what the GPU had written when fill_checked returned
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(err, cudaSuccess) << kBlocks << " x " << kThreads << " is a valid launch, got " << error_name(err);
  std::vector<int> expected(kN);
  for (int i = 0; i < kN; ++i) expected[i] = 1000 + i;
  EXPECT_TRUE(AllEqual(expected, seen, kSeed))
      << "the output as the host saw it the moment fill_checked returned, while the GPU was busy with an "
         "earlier kernel: fill_checked must wait for its kernel (cudaDeviceSynchronize) before it returns";
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

// Runs collatz_steps_on_device on `inputs` and checks every count. Input and output sit in guarded
// buffers: a thread past the end reads junk and its write changes a guard.
void check_collatz_on_device(const std::vector<std::uint32_t>& inputs, std::uint64_t seed) {
  std::vector<int> expected;
  for (std::uint32_t n : inputs) expected.push_back(reference_steps(n));
  GuardedBuffer<std::uint32_t> d_n(inputs);
  GuardedBuffer<int> d_steps(inputs.size());
  cudalab::poison(d_steps);
  collatz_steps_on_device(d_n.data(), d_steps.data(), static_cast<int>(inputs.size()));
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(AllEqual(expected, d_steps.to_host(), seed)) << "for " << inputs.size() << " inputs";
  EXPECT_TRUE(d_steps.guards_intact("the step counts"));
  EXPECT_TRUE(d_n.guards_intact("the inputs"));
  EXPECT_TRUE(AllEqual(inputs, d_n.to_host(), seed)) << "the inputs must not change";
}

class HelloCollatzCorrectness : public cudalab::GpuTest {};

TEST_F(HelloCollatzCorrectness, OnDevice) {
  SCOPED_TRACE("the last " + std::to_string(kKnownInputs.size()) +
               " inputs are 1, 2, 3, 6, 7, 27, 97, 871, 837799, 8400511, 4294967295");
  check_collatz_on_device(collatz_inputs(), kSeed);
}

class HelloCollatzSizeCorrectness : public cudalab::GpuTestWithParam<int> {};

// Counts around the block size (256 in the reference; the guard decides the last block), one input,
// and none at all (nothing launched, nothing written).
TEST_P(HelloCollatzSizeCorrectness, OnDevice) {
  const int count = GetParam();
  const std::uint64_t seed = kSeed + static_cast<std::uint64_t>(count);
  std::vector<std::uint32_t> inputs = cudalab::random_vector<std::uint32_t>(count, seed, 1, 10000000);
  if (count >= static_cast<int>(kKnownInputs.size()))  // end with the known hard cases
    std::copy(kKnownInputs.begin(), kKnownInputs.end(), inputs.end() - kKnownInputs.size());
  check_collatz_on_device(inputs, seed);
}
INSTANTIATE_TEST_SUITE_P(, HelloCollatzSizeCorrectness, ::testing::Values(0, 1, 31, 255, 256, 257, 1000),
                         cudalab::SizeName{});

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
