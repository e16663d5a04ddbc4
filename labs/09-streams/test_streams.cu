// Lab 09 tests. Correctness tests judge; perf tests only measure (the grader scores speed).
#include <gtest/gtest.h>
#include <thrust/equal.h>
#include <thrust/execution_policy.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <cudalab/bench.cuh>
#include <cudalab/check.cuh>
#include <cudalab/compare.hpp>
#include <cudalab/device_buffer.cuh>
#include <cudalab/device_random.cuh>
#include <cudalab/gtest_cuda.hpp>
#include <cudalab/random.hpp>

#include "streams.cuh"

namespace {

using cudalab::AllEqual;
using cudalab::DeviceBuffer;

constexpr std::uint64_t kSeed = 9009;
constexpr int kIters = 7;  // correctness: y = 0.5 y + x seven times, so y != x and y != 2x

// --- Helpers -------------------------------------------------------------------------------------

// Page-locked host memory (cudaMallocHost), freed on scope exit. Local to this test: the pipelines
// need pinned buffers for their copies to be asynchronous.
class PinnedFloats {
 public:
  explicit PinnedFloats(std::size_t n) : n_(n) { CUDA_CHECK(cudaMallocHost(&p_, std::max<std::size_t>(n, 1) * sizeof(float))); }
  PinnedFloats(const PinnedFloats&) = delete;
  PinnedFloats& operator=(const PinnedFloats&) = delete;
  ~PinnedFloats() { cudaFreeHost(p_); }
  float* data() { return p_; }
  const float* data() const { return p_; }
  void fill_nan() { std::fill(p_, p_ + n_, std::numeric_limits<float>::quiet_NaN()); }
  std::vector<float> to_vector() const { return std::vector<float>(p_, p_ + n_); }

 private:
  float* p_ = nullptr;
  std::size_t n_ = 0;
};

// Test-owned non-blocking streams, so pipeline tests do not depend on the student's create_streams.
class OwnStreams {
 public:
  explicit OwnStreams(int count) : streams_(count) {
    for (auto& s : streams_) CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  OwnStreams(const OwnStreams&) = delete;
  OwnStreams& operator=(const OwnStreams&) = delete;
  ~OwnStreams() {
    for (auto s : streams_) cudaStreamDestroy(s);
  }
  const std::vector<cudaStream_t>& get() const { return streams_; }
  cudaStream_t operator[](int i) const { return streams_[i]; }

 private:
  std::vector<cudaStream_t> streams_;
};

// A problem's input and expected output, made on the GPU: d_x gets random_vector(n, seed, 1, 2)'s
// values, d_y = work(d_x) from this file's own copy of the work kernel (the one the pipelines launch).
// On the CPU, work_reference (seven std::fma per element) took a few tenths of a second per 2^24
// elements, and the tests need ~10^8; KernelMatchesCpu below checks the kernel against it on a sample.
void make_problem_on_device(float* d_x, float* d_y, std::size_t n, int iters, std::uint64_t seed) {
  cudalab::random_fill(d_x, n, seed, 1.0f, 2.0f);
  launch_work(d_x, d_y, n, iters, nullptr);
}

// The test's kernel must give work_reference's value bit for bit (fmaf and std::fma both round once).
// Checked on every element up to 4096 and on 4096 evenly spread ones beyond, the last one included,
// so a kernel that drifted from the CPU fails here instead of becoming the expected answer.
::testing::AssertionResult KernelMatchesCpu(const float* h_x, const float* d_y, std::size_t n, int iters) {
  if (n == 0) return ::testing::AssertionSuccess();
  constexpr std::size_t kSamples = 4096;
  const std::size_t stride = (n + kSamples - 1) / kSamples;
  const std::size_t count = (n - 1) / stride + 1;
  std::vector<float> y(count + 1);  // every stride-th element, then the last one
  CUDA_CHECK(cudaMemcpy2D(y.data(), sizeof(float), d_y, stride * sizeof(float), sizeof(float), count,
                          cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(&y[count], d_y + n - 1, sizeof(float), cudaMemcpyDeviceToHost));
  for (std::size_t k = 0; k <= count; ++k) {
    const std::size_t i = k < count ? k * stride : n - 1;
    const float cpu = work_reference(h_x[i], iters);
    if (!(y[k] == cpu)) {
      return ::testing::AssertionFailure() << "the test's work kernel gives " << y[k] << " for element " << i
                                           << " (x = " << h_x[i] << ", iters = " << iters << "), the CPU " << cpu
                                           << ": the expected result is wrong, not your code";
    }
  }
  return ::testing::AssertionSuccess();
}

// One pipeline problem: pinned input and output, poisoned device buffers (NaN), the expected result.
struct Problem {
  Problem(std::size_t n, int iters, std::uint64_t seed)
      : n(n), iters(iters), seed(seed), h_in(n), h_out(n), d_in(std::max<std::size_t>(n, 1)),
        d_out(std::max<std::size_t>(n, 1)), expected(n) {
    // d_in and d_out hold the input and the expected result until poison() below.
    make_problem_on_device(d_in.data(), d_out.data(), n, iters, seed);
    if (n > 0) {
      CUDA_CHECK(cudaMemcpy(h_in.data(), d_in.data(), n * sizeof(float), cudaMemcpyDeviceToHost));
      CUDA_CHECK(cudaMemcpy(expected.data(), d_out.data(), n * sizeof(float), cudaMemcpyDeviceToHost));
    }
    EXPECT_TRUE(KernelMatchesCpu(h_in.data(), d_out.data(), n, iters));
    poison();
  }
  // NaN everywhere the pipeline writes: a chunk that is skipped, or copied before it is ready, shows.
  void poison() {
    h_out.fill_nan();
    cudalab::poison(d_in);
    cudalab::poison(d_out);
  }
  // h_out against the expected result, element by element (NaN never matches). Compared in place; the
  // output is copied out for AllEqual's message (first wrong indices, seed) only when it differs.
  ::testing::AssertionResult output_matches() const {
    if (std::equal(expected.begin(), expected.end(), h_out.data())) return ::testing::AssertionSuccess();
    return AllEqual(expected, h_out.to_vector(), seed);
  }
  std::size_t n;
  int iters;
  std::uint64_t seed;
  PinnedFloats h_in, h_out;
  DeviceBuffer<float> d_in, d_out;
  std::vector<float> expected;
};

__device__ unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins until the host opens the gate (*open != 0) or timeout_ns pass; reports 1 (opened) or
// 2 (timed out) in *outcome. One thread: it holds its stream, not the GPU.
__global__ void gate_kernel(const volatile int* open, volatile int* outcome, unsigned long long timeout_ns) {
  const unsigned long long start = globaltimer_ns();
  int result = 2;
  while (globaltimer_ns() - start < timeout_ns) {
    if (*open != 0) {
      result = 1;
      break;
    }
    __nanosleep(2000);
  }
  *outcome = result;
}

// A kernel that holds a stream until the host opens it: work queued behind it in that stream (or in
// any stream that synchronizes with it) cannot start. Flags live in mapped pinned host memory.
class Gate {
 public:
  Gate() {
    CUDA_CHECK(cudaHostAlloc(&flags_, 2 * sizeof(int), cudaHostAllocMapped));
    flags_[0] = 0;
    flags_[1] = 0;
    CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&d_flags_), const_cast<int*>(flags_), 0));
  }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  ~Gate() {
    open();
    cudaDeviceSynchronize();
    cudaFreeHost(const_cast<int*>(flags_));
  }
  void close(cudaStream_t stream, double timeout_s) {
    gate_kernel<<<1, 1, 0, stream>>>(d_flags_, d_flags_ + 1, static_cast<unsigned long long>(timeout_s * 1e9));
    CUDA_CHECK(cudaGetLastError());
  }
  void open() { flags_[0] = 1; }
  int outcome() const { return flags_[1]; }  // 0 still closed, 1 opened by the host, 2 timed out

 private:
  volatile int* flags_ = nullptr;
  int* d_flags_ = nullptr;
};

constexpr double kGateTimeoutS = 3.0;

// "No use of the legacy default stream": run the pipeline while a gate kernel holds stream 0. A
// pipeline that stays on its own non-blocking streams finishes with the gate still closed; one that
// touches stream 0 (cudaMemcpy, a launch without a stream, cudaDeviceSynchronize, a blocking
// stream) waits for the gate until it times out.
void expect_ignores_legacy_stream(Problem& p, const std::function<void()>& run, const char* what) {
  // Warm-up: with lazy loading (the default since CUDA 12) the first launch of a kernel may wait for
  // the device; the gate must not be what it waits for.
  run();
  p.poison();
  CUDA_CHECK(cudaDeviceSynchronize());

  Gate gate;
  cudaEvent_t gate_passed;
  CUDA_CHECK(cudaEventCreateWithFlags(&gate_passed, cudaEventDisableTiming));
  gate.close(cudaStreamLegacy, kGateTimeoutS);
  CUDA_CHECK(cudaEventRecord(gate_passed, cudaStreamLegacy));
  const auto t0 = std::chrono::steady_clock::now();
  run();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const cudaError_t still_closed = cudaEventQuery(gate_passed);
  if (cudaPeekAtLastError() == cudaErrorNotReady) cudaGetLastError();  // that answer is not an error
  gate.open();
  CUDA_CHECK(cudaEventSynchronize(gate_passed));
  CUDA_CHECK(cudaEventDestroy(gate_passed));

  EXPECT_EQ(still_closed, cudaErrorNotReady)
      << what << " returned only after " << seconds << " s, once a kernel holding the legacy default stream "
      << "(stream 0) had timed out: something in it waits for stream 0. Use your own streams created with "
      << "cudaStreamNonBlocking, cudaMemcpyAsync on them (not cudaMemcpy), launches with a stream, and "
      << "cudaStreamSynchronize (not cudaDeviceSynchronize).";
  EXPECT_EQ(gate.outcome(), 1) << "the gate kernel on stream 0 timed out instead of being opened";
  EXPECT_TRUE(p.output_matches()) << what << " gave a wrong result";
}

struct PipeCase {
  std::size_t n;
  int streams, chunks;
};

void PrintTo(const PipeCase& c, std::ostream* os) {
  *os << "n = " << c.n << ", " << c.streams << " streams, " << c.chunks << " chunks";
}

std::string pipe_case_name(const ::testing::TestParamInfo<PipeCase>& info) {
  return "n" + std::to_string(info.param.n) + "_s" + std::to_string(info.param.streams) + "_c" +
         std::to_string(info.param.chunks);
}

// Chunk counts that do not divide n, 1 to 16 streams, fewer streams than chunks and more.
const std::vector<PipeCase> kPipeCases = {
    {1, 1, 1},           {1000, 3, 7},         {4099, 16, 16},       {65531, 2, 9},
    {65531, 5, 3},       {(1u << 20) + 3, 4, 16}, {(1u << 20) + 3, 16, 5}, {(1u << 22) + 1, 1, 13},
    {(1u << 22) + 1, 7, 64}, {(1u << 24) + 3, 8, 24}, {(1u << 24) + 3, 16, 16},
};

// --- Task 1: serial ------------------------------------------------------------------------------

class StreamsSerialCorrectness : public cudalab::GpuTestWithParam<std::size_t> {};

TEST_P(StreamsSerialCorrectness, MatchesCpu) {
  const std::size_t n = GetParam();
  CUDALAB_SKIP_IF_LARGE(n);
  DeviceBuffer<float> d_in(n), d_out(n);
  make_problem_on_device(d_in.data(), d_out.data(), n, kIters, kSeed + n);
  const std::vector<float> in = d_in.to_host();  // pageable host memory is fine here
  const std::vector<float> expected = d_out.to_host();
  EXPECT_TRUE(KernelMatchesCpu(in.data(), d_out.data(), n, kIters));
  std::vector<float> out(n, std::numeric_limits<float>::quiet_NaN());
  cudalab::poison(d_in);
  cudalab::poison(d_out);
  run_serial(in.data(), out.data(), d_in.data(), d_out.data(), n, kIters);
  EXPECT_TRUE(AllEqual(expected, out, kSeed + n));
}
INSTANTIATE_TEST_SUITE_P(, StreamsSerialCorrectness,
                         ::testing::Values(std::size_t{1}, std::size_t{1000}, std::size_t{65531},
                                           (std::size_t{1} << 20) + 3, (std::size_t{1} << 24) + 1),
                         cudalab::SizeName());

// --- Task 2: streams -----------------------------------------------------------------------------

class StreamsCreateCorrectness : public cudalab::GpuTestWithParam<int> {};

TEST_P(StreamsCreateCorrectness, NonBlocking) {
  const int count = GetParam();
  const std::vector<cudaStream_t> streams = create_streams(count);
  ASSERT_EQ(streams.size(), static_cast<std::size_t>(count)) << "create_streams(" << count << ")";
  std::set<cudaStream_t> distinct(streams.begin(), streams.end());
  EXPECT_EQ(distinct.size(), streams.size()) << "the same stream was returned more than once";
  for (cudaStream_t s : streams) {
    ASSERT_NE(s, nullptr) << "stream 0 (the legacy default stream) is not a new stream";
    ASSERT_NE(s, cudaStreamLegacy);
    ASSERT_NE(s, cudaStreamPerThread);
    unsigned int flags = 0;
    CUDA_CHECK(cudaStreamGetFlags(s, &flags));
    EXPECT_EQ(flags & cudaStreamNonBlocking, static_cast<unsigned int>(cudaStreamNonBlocking))
        << "a stream made by cudaStreamCreate synchronizes with the legacy default stream: create it with "
           "cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)";
  }
  destroy_streams(streams);
  CUDA_CHECK(cudaDeviceSynchronize());
}
INSTANTIATE_TEST_SUITE_P(, StreamsCreateCorrectness, ::testing::Values(1, 4, 16), cudalab::SizeName());

// --- Task 3: pipeline ----------------------------------------------------------------------------

class StreamsPipelineCorrectness : public cudalab::GpuTestWithParam<PipeCase> {};

TEST_P(StreamsPipelineCorrectness, MatchesCpu) {
  const PipeCase c = GetParam();
  CUDALAB_SKIP_IF_LARGE(c.n);
  Problem p(c.n, kIters, kSeed + 2 * c.n + c.chunks);
  OwnStreams streams(c.streams);
  run_pipelined(p.h_in.data(), p.h_out.data(), p.d_in.data(), p.d_out.data(), c.n, kIters, c.chunks, streams.get());
  EXPECT_TRUE(p.output_matches())
      << c.streams << " streams, " << c.chunks << " chunks (NaN: never copied back, or computed on input that had "
      << "not arrived)";
}
INSTANTIATE_TEST_SUITE_P(, StreamsPipelineCorrectness, ::testing::ValuesIn(kPipeCases), pipe_case_name);

class StreamsLegacyCorrectness : public cudalab::GpuTest {
 protected:
  void SetUp() override {
    cudalab::GpuTest::SetUp();
    if (IsSkipped()) return;
    // compute-sanitizer runs kernels one at a time, so the gate would hold everything.
    if (cudalab::small_mode()) CUDALAB_SKIP("small mode (CUDALAB_SMALL): needs kernels to run concurrently");
  }
  static constexpr std::size_t kN = (std::size_t{1} << 22) + 5;
};

TEST_F(StreamsLegacyCorrectness, PipelineIgnoresLegacyStream) {
  Problem p(kN, kIters, kSeed + 31);
  OwnStreams streams(4);
  expect_ignores_legacy_stream(
      p,
      [&] {
        run_pipelined(p.h_in.data(), p.h_out.data(), p.d_in.data(), p.d_out.data(), kN, kIters, 8, streams.get());
      },
      "run_pipelined");
}

// --- Task 4: three stages, events between them -----------------------------------------------------

struct StageCase {
  std::size_t n;
  int chunks;
};

void PrintTo(const StageCase& c, std::ostream* os) { *os << "n = " << c.n << ", " << c.chunks << " chunks"; }

std::string stage_case_name(const ::testing::TestParamInfo<StageCase>& info) {
  return "n" + std::to_string(info.param.n) + "_c" + std::to_string(info.param.chunks);
}

class StreamsThreeStageCorrectness : public cudalab::GpuTestWithParam<StageCase> {};

TEST_P(StreamsThreeStageCorrectness, MatchesCpu) {
  const StageCase c = GetParam();
  CUDALAB_SKIP_IF_LARGE(c.n);
  Problem p(c.n, kIters, kSeed + 3 * c.n + c.chunks);
  OwnStreams s(3);
  run_three_stage(p.h_in.data(), p.h_out.data(), p.d_in.data(), p.d_out.data(), c.n, kIters, c.chunks, s[0], s[1],
                  s[2]);
  EXPECT_TRUE(p.output_matches()) << c.chunks << " chunks";
}
INSTANTIATE_TEST_SUITE_P(, StreamsThreeStageCorrectness,
                         ::testing::Values(StageCase{1, 1}, StageCase{1000, 7}, StageCase{65531, 9},
                                           StageCase{(1u << 20) + 3, 16}, StageCase{(1u << 24) + 3, 24}),
                         stage_case_name);

// The dependencies, made visible: hold one stage's stream closed for 100 ms with a gate. Without a
// cudaStreamWaitEvent, the next stage runs on data that is not there yet (NaN), every time.
class StreamsEventsCorrectness : public StreamsLegacyCorrectness {
 protected:
  enum class Hold { kH2d, kCompute };
  void run_held(Hold hold) {
    Problem p(kN, kIters, kSeed + 41);
    OwnStreams s(3);
    auto run = [&] {
      run_three_stage(p.h_in.data(), p.h_out.data(), p.d_in.data(), p.d_out.data(), kN, kIters, 8, s[0], s[1], s[2]);
    };
    run();  // warm-up (lazy loading), see expect_ignores_legacy_stream
    p.poison();
    CUDA_CHECK(cudaDeviceSynchronize());

    Gate gate;
    gate.close(hold == Hold::kH2d ? s[0] : s[1], kGateTimeoutS);
    std::thread opener([&gate] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      gate.open();
    });
    run();
    opener.join();
    for (int i = 0; i < 3; ++i) CUDA_CHECK(cudaStreamSynchronize(s[i]));
    EXPECT_EQ(gate.outcome(), 1) << "the gate timed out instead of being opened";
    EXPECT_TRUE(p.output_matches())
        << (hold == Hold::kH2d
                ? "with the H2D stream held back for 100 ms, the kernels did not wait for their input: make s_compute "
                  "wait (cudaStreamWaitEvent) for an event recorded on s_h2d after the chunk's copy"
                : "with the compute stream held back for 100 ms, the copies back did not wait for the kernels: make "
                  "s_d2h wait (cudaStreamWaitEvent) for an event recorded on s_compute after the chunk's kernel");
  }
};

TEST_F(StreamsEventsCorrectness, KernelWaitsForItsCopyIn) { run_held(Hold::kH2d); }
TEST_F(StreamsEventsCorrectness, CopyOutWaitsForItsKernel) { run_held(Hold::kCompute); }

TEST_F(StreamsEventsCorrectness, ThreeStageIgnoresLegacyStream) {
  Problem p(kN, kIters, kSeed + 43);
  OwnStreams s(3);
  expect_ignores_legacy_stream(
      p,
      [&] {
        run_three_stage(p.h_in.data(), p.h_out.data(), p.d_in.data(), p.d_out.data(), kN, kIters, 8, s[0], s[1], s[2]);
      },
      "run_three_stage");
}

// --- Task 5: host callback -----------------------------------------------------------------------

// What the callbacks saw. on_chunk_done checks, at the moment it runs, that its chunk of h_out
// already holds the right values: true only if the callback ran after the chunk's D2H copy.
struct CallbackLog {
  const float* h_out = nullptr;
  const std::vector<float>* expected = nullptr;
  std::size_t n = 0;
  int chunks = 0;
  std::mutex mutex;
  std::vector<int> calls, ready;
  int out_of_range = 0;
};

void on_chunk_done(int chunk, void* user) {
  auto* log = static_cast<CallbackLog*>(user);
  const bool in_range = chunk >= 0 && chunk < log->chunks;
  bool ready = false;
  if (in_range) {
    const std::size_t begin = chunk_begin(log->n, log->chunks, chunk);
    const std::size_t end = chunk_begin(log->n, log->chunks, chunk + 1);
    ready = std::equal(log->h_out + begin, log->h_out + end, log->expected->begin() + begin);
  }
  std::lock_guard<std::mutex> lock(log->mutex);
  if (!in_range) {
    ++log->out_of_range;
    return;
  }
  ++log->calls[chunk];
  log->ready[chunk] = ready ? 1 : 0;
}

void run_with_log(Problem& p, CallbackLog& log, const std::vector<cudaStream_t>& streams, int chunks) {
  log.h_out = p.h_out.data();
  log.expected = &p.expected;
  log.n = p.n;
  log.chunks = chunks;
  log.calls.assign(chunks, 0);
  log.ready.assign(chunks, 0);
  log.out_of_range = 0;
  run_pipelined_with_callback(p.h_in.data(), p.h_out.data(), p.d_in.data(), p.d_out.data(), p.n, p.iters, chunks,
                              streams, on_chunk_done, &log);
}

class StreamsCallbackCorrectness : public cudalab::GpuTestWithParam<PipeCase> {};

TEST_P(StreamsCallbackCorrectness, OncePerChunkAfterItsCopy) {
  const PipeCase c = GetParam();
  CUDALAB_SKIP_IF_LARGE(c.n);
  Problem p(c.n, kIters, kSeed + 5 * c.n + c.chunks);
  OwnStreams streams(c.streams);
  CallbackLog log;
  run_with_log(p, log, streams.get(), c.chunks);
  std::lock_guard<std::mutex> lock(log.mutex);  // every callback has run: the function waited for its streams
  EXPECT_TRUE(AllEqual(std::vector<int>(c.chunks, 1), log.calls, p.seed))
      << "calls of on_done per chunk (index = chunk): each chunk's callback must run exactly once, before "
         "run_pipelined_with_callback returns";
  EXPECT_TRUE(AllEqual(std::vector<int>(c.chunks, 1), log.ready, p.seed))
      << "1 = the chunk's results were in h_out when its callback ran; 0 = the callback ran before its D2H copy "
         "was done: enqueue it after the copy, in the same stream";
  EXPECT_EQ(log.out_of_range, 0) << "on_done was called with a chunk index outside 0.." << c.chunks - 1;
  EXPECT_TRUE(p.output_matches());
}
INSTANTIATE_TEST_SUITE_P(, StreamsCallbackCorrectness,
                         ::testing::Values(PipeCase{1, 1, 1}, PipeCase{1000, 3, 7}, PipeCase{65531, 4, 16},
                                           PipeCase{(1u << 22) + 1, 8, 33}, PipeCase{(1u << 24) + 3, 16, 16}),
                         pipe_case_name);

TEST_F(StreamsLegacyCorrectness, CallbackPipelineIgnoresLegacyStream) {
  Problem p(kN, kIters, kSeed + 53);
  OwnStreams streams(4);
  CallbackLog log;
  expect_ignores_legacy_stream(p, [&] { run_with_log(p, log, streams.get(), 8); }, "run_pipelined_with_callback");
}

// --- Task 6: trace -------------------------------------------------------------------------------

// Times of the 4 * chunks trace events relative to trace[0], in ms; empty (with a message) if an
// event was never recorded.
std::vector<float> trace_times(const std::vector<cudaEvent_t>& trace, std::string* problem) {
  std::vector<float> t(trace.size(), 0.0f);
  for (std::size_t m = 0; m < trace.size(); ++m) {
    const cudaError_t err = cudaEventElapsedTime(&t[m], trace[0], trace[m]);
    if (err != cudaSuccess) {
      cudaGetLastError();  // a never-recorded event is the student's bug, not a pending CUDA error
      *problem = "trace[" + std::to_string(m) + "] gives no time (" + cudaGetErrorName(err) +
                 "): was it recorded, after trace[0]?";
      return {};
    }
  }
  return t;
}

class StreamsTraceCorrectness : public cudalab::GpuTest {};

// The events must bracket each stage in order. A copy of 16 MiB cannot take less than 8 us even at
// 2 TB/s (PCIe moves ~55 GB/s), so a copy bracketed by events recorded next to each other shows.
TEST_F(StreamsTraceCorrectness, EventsBracketEachStage) {
  const std::size_t n = std::size_t{1} << 24;
  CUDALAB_SKIP_IF_LARGE(n);
  const int chunks = 4;
  Problem p(n, kIters, kSeed + 61);
  OwnStreams streams(4);
  std::vector<cudaEvent_t> trace(4 * chunks);
  for (auto& e : trace) CUDA_CHECK(cudaEventCreate(&e));
  run_pipelined(p.h_in.data(), p.h_out.data(), p.d_in.data(), p.d_out.data(), n, kIters, chunks, streams.get(),
                trace.data());
  CUDA_CHECK(cudaDeviceSynchronize());
  std::string problem;
  const auto t = trace_times(trace, &problem);
  for (auto e : trace) CUDA_CHECK(cudaEventDestroy(e));
  ASSERT_FALSE(t.empty()) << problem;
  const double min_copy_ms = (n / chunks) * sizeof(float) / 2e12 * 1e3;
  for (int c = 0; c < chunks; ++c) {
    const float* m = &t[4 * c];
    EXPECT_TRUE(m[0] <= m[1] && m[1] <= m[2] && m[2] <= m[3])
        << "chunk " << c << ": trace times " << m[0] << ", " << m[1] << ", " << m[2] << ", " << m[3]
        << " ms are out of order (before H2D, after H2D, after kernel, after D2H)";
    EXPECT_GE(m[1] - m[0], min_copy_ms) << "chunk " << c << ": trace[4c] and trace[4c + 1] do not bracket its H2D copy";
    EXPECT_GE(m[3] - m[2], min_copy_ms) << "chunk " << c << ": trace[4c + 2] and trace[4c + 3] do not bracket its D2H copy";
  }
  EXPECT_TRUE(p.output_matches());
}

// --- Perf ----------------------------------------------------------------------------------------

// 2^26 floats: 256 MiB each way over PCIe (~5 ms per direction at ~55 GB/s).
constexpr std::size_t kPerfN = std::size_t{1} << 26;
constexpr int kPerfStreams = 16;
constexpr int kPerfChunks = 16;
// Balanced: the kernel takes about 1.4x one copy on an H100 or H200 (FP32 at ~60 TFLOP/s), so the
// copies, which slow down when both directions run at once, stay hidden behind it.
constexpr int kBalancedIters = 2816;
// Transfer-bound: a few FMAs per element; the kernel is a small fraction of either copy.
constexpr int kTransferBoundIters = 2;
// Inputs that change before every call of the pipeline (see time_pipeline): runs of h_in negated in
// every chunk, and positions of h_out poisoned and checked.
constexpr int kFlipRunsPerChunk = 4;
constexpr std::size_t kFlipRun = 4096;  // floats per run: 64 runs of 16 KiB, 1 MiB of h_in per call
constexpr int kCanaries = 4096;         // random positions of h_out, beside the ends of chunks and runs
static_assert(kPerfN / kPerfChunks >= kFlipRun, "a run fits in a chunk");

// The serial baseline, written here so every run times the same thing.
void serial_baseline(const float* h_in, float* h_out, float* d_in, float* d_out, std::size_t n, int iters,
                     cudaStream_t s) {
  CUDA_CHECK(cudaMemcpyAsync(d_in, h_in, n * sizeof(float), cudaMemcpyHostToDevice, s));
  launch_work(d_in, d_out, n, iters, s);
  CUDA_CHECK(cudaMemcpyAsync(h_out, d_out, n * sizeof(float), cudaMemcpyDeviceToHost, s));
  CUDA_CHECK(cudaStreamSynchronize(s));
}

// The perf tests' pinned input and output, made on first use and shared by both tests (freed after the
// suite): pinning 2 x 256 MiB, and releasing it, is a good part of a second and not what is measured.
struct PerfHostBuffers {
  PinnedFloats h_in{kPerfN}, h_out{kPerfN};
};

// End-to-end milliseconds: the pipeline (impl) beside the serial flow and the three components, all
// measured in this run. The floor is the pipeline bound max(H2D, K, D2H) + (sum - max) / chunks.
void time_pipeline(PerfHostBuffers& host, int iters, const std::string& label) {
  const std::size_t n = kPerfN;
  PinnedFloats& h_in = host.h_in;
  PinnedFloats& h_out = host.h_out;
  DeviceBuffer<float> d_in(n), d_out(n), d_ref(n), d_check(n);
  OwnStreams streams(kPerfStreams);
  OwnStreams stages(3);
  cudaStream_t s0 = stages[0];

  // The input and the expected result (the same kernel from this file, checked on a sample against the
  // CPU), made on the GPU; a pipeline's output is checked there too, copied back in next to d_ref: a
  // 256 MiB expected array made, copied and compared on the host is not what is measured.
  make_problem_on_device(d_in.data(), d_ref.data(), n, iters, kSeed + 71);
  CUDA_CHECK(cudaMemcpy(h_in.data(), d_in.data(), n * sizeof(float), cudaMemcpyDeviceToHost));
  ASSERT_TRUE(KernelMatchesCpu(h_in.data(), d_ref.data(), n, iters));
  auto output_ok = [&] {
    CUDA_CHECK(cudaMemcpy(d_check.data(), h_out.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    return thrust::equal(thrust::device, d_check.data(), d_check.data() + n, d_ref.data());  // NaN never equal
  };

  h_out.fill_nan();
  cudalab::poison(d_in);
  cudalab::poison(d_out);
  run_pipelined(h_in.data(), h_out.data(), d_in.data(), d_out.data(), n, iters, kPerfChunks, streams.get());
  if (!output_ok()) CUDALAB_SKIP("run_pipelined is incorrect at this size: not timed");
  h_out.fill_nan();
  run_three_stage(h_in.data(), h_out.data(), d_in.data(), d_out.data(), n, iters, kPerfChunks, stages[0], stages[1],
                  stages[2]);
  const bool three_stage_ok = output_ok();

  cudalab::bench::Options options;
  options.flush_l2 = false;  // the data comes over PCIe; a memset on stream 0 would only blur the start
  // Transfer-bound, the rounds (about 30 ms) did not get every variant under 1 % noise, so the suite ran
  // to the 4 s cap; a second still gives each variant some 30 samples. Balanced settles sooner anyway.
  options.max_seconds = 1.0;
  cudalab::bench::Suite suite(cudalab::bench::Work::time_only(), label, options);
  // New inputs before every call of the pipeline, in place: work(-x) = -work(x) exactly and every x > 0,
  // so prepare negates kFlipRunsPerChunk random runs of h_in per chunk (the sign of h_in[i] tells verify
  // ref[i] or -ref[i]) and poisons d_in, d_out and the ~4300 positions of h_out that verify reads: both ends
  // of every chunk and every run, one position inside each run, kCanaries random ones. That suffices: a
  // skipped chunk leaves NaN at its ends, an earlier call's answer is wrong in every run, and skipping (or
  // copying back too early) a fraction f of the elements passes with probability (1 - f)^kCanaries.
  const std::vector<float> ref = d_ref.to_host();  // work(x) for the input as made
  std::vector<std::size_t> checked;
  suite.add("impl", [&] {
    run_pipelined(h_in.data(), h_out.data(), d_in.data(), d_out.data(), n, iters, kPerfChunks, streams.get());
  });
  suite.prepare([&](int call) {
    // Call c draws from its own stretch of Rng(kSeed + 72)'s stream (2^32 draws long).
    cudalab::Rng rng = cudalab::Rng::at(kSeed + 72, static_cast<std::uint64_t>(call) << 32);
    checked.clear();
    for (int c = 0; c < kPerfChunks; ++c) {
      const std::size_t begin = chunk_begin(n, kPerfChunks, c), end = chunk_begin(n, kPerfChunks, c + 1);
      checked.push_back(begin);
      checked.push_back(end - 1);
      for (int r = 0; r < kFlipRunsPerChunk; ++r) {
        const auto run = static_cast<std::size_t>(
            rng.integer(static_cast<std::int64_t>(begin), static_cast<std::int64_t>(end - kFlipRun)));
        for (std::size_t i = run; i < run + kFlipRun; ++i) h_in.data()[i] = -h_in.data()[i];
        checked.push_back(run);
        checked.push_back(run + kFlipRun - 1);
        checked.push_back(run + static_cast<std::size_t>(rng.integer(1, static_cast<std::int64_t>(kFlipRun) - 2)));
      }
    }
    for (int k = 0; k < kCanaries; ++k) {
      checked.push_back(static_cast<std::size_t>(rng.integer(0, static_cast<std::int64_t>(n) - 1)));
    }
    for (std::size_t i : checked) h_out.data()[i] = std::numeric_limits<float>::quiet_NaN();
    cudalab::poison(d_in);
    cudalab::poison(d_out);
    CUDA_CHECK(cudaDeviceSynchronize());  // the memsets run on stream 0, which the pipeline's streams ignore
  });
  suite.verify([&](int) {
    for (std::size_t i : checked) {
      const float expected = std::signbit(h_in.data()[i]) ? -ref[i] : ref[i];
      if (!(h_out.data()[i] == expected)) return false;  // NaN never matches
    }
    return true;
  });
  suite.add("serial", [&] { serial_baseline(h_in.data(), h_out.data(), d_in.data(), d_out.data(), n, iters, s0); });
  if (three_stage_ok) {
    suite.add("three_stage", [&] {
      run_three_stage(h_in.data(), h_out.data(), d_in.data(), d_out.data(), n, iters, kPerfChunks, stages[0],
                      stages[1], stages[2]);
    });
  }
  suite.add("h2d", [&] {
    CUDA_CHECK(cudaMemcpyAsync(d_in.data(), h_in.data(), n * sizeof(float), cudaMemcpyHostToDevice, s0));
    CUDA_CHECK(cudaStreamSynchronize(s0));
  });
  suite.add("kernel", [&] {
    launch_work(d_in.data(), d_out.data(), n, iters, s0);
    CUDA_CHECK(cudaStreamSynchronize(s0));
  });
  suite.add("d2h", [&] {
    CUDA_CHECK(cudaMemcpyAsync(h_out.data(), d_out.data(), n * sizeof(float), cudaMemcpyDeviceToHost, s0));
    CUDA_CHECK(cudaStreamSynchronize(s0));
  });
  suite.baseline("serial");
  suite.run();

  const double h2d = suite.stats("h2d").median_ms, kernel = suite.stats("kernel").median_ms,
               d2h = suite.stats("d2h").median_ms;
  const double longest = std::max({h2d, kernel, d2h});
  suite.floor_ms(longest + (h2d + kernel + d2h - longest) / kPerfChunks);
  suite.record();
  ::testing::Test::RecordProperty("iters", iters);
  ::testing::Test::RecordProperty("streams", kPerfStreams);
  ::testing::Test::RecordProperty("chunks", kPerfChunks);

  // One traced run of the pipeline for the report's timeline: stage:chunk:start_ms:end_ms entries,
  // relative to the first event. Left out if the pipeline does not record the trace.
  std::vector<cudaEvent_t> trace(4 * kPerfChunks);
  for (auto& e : trace) CUDA_CHECK(cudaEventCreate(&e));
  run_pipelined(h_in.data(), h_out.data(), d_in.data(), d_out.data(), n, iters, kPerfChunks, streams.get(),
                trace.data());
  CUDA_CHECK(cudaDeviceSynchronize());
  std::string problem;
  const auto t = trace_times(trace, &problem);
  for (auto e : trace) CUDA_CHECK(cudaEventDestroy(e));
  if (!t.empty()) {
    std::ostringstream timeline;
    timeline.setf(std::ios::fixed);
    timeline.precision(3);
    const char* stages_names[] = {"h2d", "kernel", "d2h"};
    for (int c = 0; c < kPerfChunks; ++c) {
      for (int s = 0; s < 3; ++s) {
        timeline << (c == 0 && s == 0 ? "" : ";") << stages_names[s] << ':' << c << ':' << t[4 * c + s] << ':'
                 << t[4 * c + s + 1];
      }
    }
    ::testing::Test::RecordProperty("timeline", timeline.str());
  }
}

class StreamsPerf : public cudalab::GpuTest {
 protected:
  static PerfHostBuffers& host_buffers() {
    if (!host_buffers_) host_buffers_ = std::make_unique<PerfHostBuffers>();
    return *host_buffers_;
  }
  static void TearDownTestSuite() { host_buffers_.reset(); }

 private:
  static inline std::unique_ptr<PerfHostBuffers> host_buffers_;
};

TEST_F(StreamsPerf, Balanced) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  time_pipeline(host_buffers(), kBalancedIters, "2^26 floats, kernel ~1.4x a copy (iters = " + std::to_string(kBalancedIters) + ")");
}

TEST_F(StreamsPerf, TransferBound) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  time_pipeline(host_buffers(), kTransferBoundIters, "2^26 floats, transfer-bound (iters = " + std::to_string(kTransferBoundIters) + ")");
}

}  // namespace
