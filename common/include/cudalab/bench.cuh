// Benchmark harness for perf tests. A Suite times the function under test ("impl") and its library
// baselines in the same process, on the same buffers, alternating sample by sample, and records the
// results as GoogleTest properties that the grader turns into scores and charts.
//
// Protocol (docs/timing.md): warm-up calls; before every sample a memset larger than the L2 cache so
// each sample starts cold (queued right before the start event, it also hides launch latency), and the
// persisting-L2 lines reset; CUDA events around one call; at least min_samples rounds, until every
// variant's noise is under max_noise_pct or the time cap; the median is the figure that counts. Perf
// tests never assert on time.
//
// A time counts only for work that was done and checked:
//  - prepare(call), untimed, before every call of a variant: new inputs in the same buffers (so an
//    answer remembered from an earlier call is wrong) and a poisoned output;
//  - verify(call), untimed, after every call: the output of that call is right. A wrong one fails the
//    test (a perf score is never earned by a cached, stale or skipped answer);
//  - after the stop event the whole device is synchronized and a third event recorded: the time from
//    stop to it (tail_ms) shows work the call left running on other streams, which the grader refuses.
//
//   cudalab::bench::Suite suite(cudalab::bench::Work::bytes(12.0 * n), "N = 2^28");
//   suite.add("impl", [&] { vector_add(d_a, d_b, d_c, n); })
//       .prepare([&](int call) { /* new a, b for this call; poison c */ })
//       .verify([&](int call) { return /* c == a + b for this call */; });
//   suite.add("thrust", [&] { thrust::transform(...); });
//   suite.baseline("thrust").floor_ms(cudalab::bench::copy_floor_ms(12.0 * n));
//   suite.run();
//   suite.record();
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "check.cuh"
#include "device_buffer.cuh"

namespace cudalab::bench {

// What one call does, so the grader can turn a time into a rate.
struct Work {
  const char* metric;  // "GB/s", "TFLOP/s", "Gkeys/s", or "ms" (no rate: lower time is better)
  double amount;       // bytes, flops or keys per call
  double scale;        // metric = amount / seconds / scale

  static Work bytes(double b) { return {"GB/s", b, 1e9}; }
  static Work flops(double f) { return {"TFLOP/s", f, 1e12}; }
  static Work keys(double k) { return {"Gkeys/s", k, 1e9}; }
  static Work time_only() { return {"ms", 0.0, 1.0}; }
};

struct Options {
  int warmup = 2;
  int min_samples = 10;
  int max_samples = 200;
  double max_noise_pct = 1.0;
  double max_seconds = 4.0;  // cap for the whole suite, warm-up excluded
  bool flush_l2 = true;
};

struct Stats {
  double median_ms = 0, min_ms = 0, mean_ms = 0, noise_pct = 0;
  int samples = 0;
};

inline Stats summarize(std::vector<double> ms) {
  Stats s;
  s.samples = static_cast<int>(ms.size());
  if (ms.empty()) return s;
  std::sort(ms.begin(), ms.end());
  const std::size_t n = ms.size();
  s.median_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  s.min_ms = ms.front();
  s.mean_ms = std::accumulate(ms.begin(), ms.end(), 0.0) / n;
  double var = 0;
  for (double x : ms) var += (x - s.mean_ms) * (x - s.mean_ms);
  const double stdev = n > 1 ? std::sqrt(var / (n - 1)) : 0.0;
  s.noise_pct = s.mean_ms > 0 ? 100.0 * stdev / s.mean_ms : 0.0;
  return s;
}

// A buffer larger than the L2 cache; writing it evicts whatever the last sample left there.
inline void flush_l2(cudaStream_t stream = nullptr) {
  static DeviceBuffer<unsigned char> scratch = [] {
    int device = 0, l2 = 0;
    CUDA_CHECK(cudaGetDevice(&device));
    CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    return DeviceBuffer<unsigned char>(std::max<std::size_t>(2 * static_cast<std::size_t>(l2), 64u << 20));
  }();
  CUDA_CHECK(cudaMemsetAsync(scratch.data(), 0x5A, scratch.bytes(), stream));
}

// Device-to-device cudaMemcpy throughput (bytes read + bytes written), measured once per process on
// 512 MiB: the practical ceiling that memory-bound floors divide by.
inline double copy_bandwidth_gbps() {
  static const double gbps = [] {
    const std::size_t bytes = std::size_t{512} << 20;
    DeviceBuffer<unsigned char> src(bytes), dst(bytes);
    CUDA_CHECK(cudaMemset(src.data(), 1, bytes));
    cudaEvent_t start, stop;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    std::vector<double> ms;
    for (int i = 0; i < 12; ++i) {
      CUDA_CHECK(cudaEventRecord(start));
      CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice));
      CUDA_CHECK(cudaEventRecord(stop));
      CUDA_CHECK(cudaEventSynchronize(stop));
      float t = 0;
      CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
      if (i >= 2) ms.push_back(t);  // the first two are warm-up
    }
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    return 2.0 * bytes / (summarize(ms).median_ms * 1e-3) / 1e9;
  }();
  return gbps;
}

// The time a memory-bound call needs at least: its bytes at the measured copy throughput.
inline double copy_floor_ms(double bytes) { return bytes / (copy_bandwidth_gbps() * 1e9) * 1e3; }

// Data pinned in L2 with an access-policy window would survive the flush: no persisting lines, ever.
inline void reset_persisting_l2(bool set_limit) {
  if (set_limit) cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0);
  cudaCtxResetPersistingL2Cache();
  cudaGetLastError();  // a GPU without persisting L2 says so; that is not the test's error
}

// "N = 2^28" for powers of two, "N = 1000003" otherwise: the label perf charts group by.
inline std::string size_label(std::size_t n, const char* name = "N") {
  std::string label = std::string(name) + " = ";
  if (n > 0 && (n & (n - 1)) == 0) {
    int log2 = 0;
    while ((std::size_t{1} << log2) < n) ++log2;
    return label + "2^" + std::to_string(log2);
  }
  return label + std::to_string(n);
}

class Suite {
 public:
  explicit Suite(Work work, std::string label = "", Options options = {})
      : work_(work), label_(std::move(label)), options_(options) {}

  // The first variant added is the function under test; by convention it is named "impl".
  Suite& add(std::string name, std::function<void()> fn) {
    variants_.push_back({std::move(name), std::move(fn)});
    return *this;
  }
  // For the variant added last: called untimed before each of its calls (warm-up ones included) with
  // the call's number, 0, 1, 2, ...: set this call's inputs in place, poison the output.
  Suite& prepare(std::function<void(int)> fn) {
    last().prepare = std::move(fn);
    return *this;
  }
  // For the variant added last: called untimed after each of its calls; false when the output is wrong.
  Suite& verify(std::function<bool(int)> fn) {
    last().verify = std::move(fn);
    return *this;
  }
  Suite& baseline(std::string name) {
    baseline_ = std::move(name);
    return *this;
  }
  Suite& floor_ms(double ms) {
    floor_ms_ = ms;
    return *this;
  }
  // The least time the laws of the hardware allow (for a metric the grader cannot derive one for, such
  // as a pipeline's bytes over PCIe): a median below it is implausible and earns no perf points.
  Suite& physical_floor_ms(double ms) {
    physical_floor_ms_ = ms;
    return *this;
  }

  // Runs every variant; false (and a test failure) when a verified call's output was wrong.
  bool run() {
    if (variants_.empty()) throw std::logic_error("bench::Suite::run with no variants");
    cudaEvent_t start, stop, after;
    CUDA_CHECK(cudaEventCreate(&start));
    CUDA_CHECK(cudaEventCreate(&stop));
    CUDA_CHECK(cudaEventCreate(&after));
    reset_persisting_l2(true);
    bool ok = true;
    for (auto& v : variants_) {
      for (int i = 0; i < options_.warmup && ok; ++i) {
        if (v.prepare) v.prepare(v.calls);
        v.fn();
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaDeviceSynchronize());
        ok = check(v);
      }
    }

    const auto t0 = std::chrono::steady_clock::now();
    for (int round = 0; round < options_.max_samples && ok; ++round) {
      for (auto& v : variants_) {  // alternate, so drift in clocks or temperature hits all alike
        if (v.prepare) v.prepare(v.calls);
        reset_persisting_l2(false);
        if (options_.flush_l2) flush_l2();
        CUDA_CHECK(cudaEventRecord(start));
        v.fn();
        CUDA_CHECK(cudaGetLastError());
        CUDA_CHECK(cudaEventRecord(stop));
        // Whatever the call started on other streams must be finished before the next sample; how
        // long that took after the stop event is the call's tail.
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaEventRecord(after));
        CUDA_CHECK(cudaEventSynchronize(after));
        float ms = 0, tail = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
        CUDA_CHECK(cudaEventElapsedTime(&tail, stop, after));
        v.samples.push_back(ms);
        v.tails.push_back(tail);
        if (!(ok = check(v))) break;
      }
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (round + 1 >= options_.min_samples && (quiet() || elapsed > options_.max_seconds)) break;
    }
    for (auto& v : variants_) v.stats = summarize(v.samples);
    CUDA_CHECK(cudaEventDestroy(start));
    CUDA_CHECK(cudaEventDestroy(stop));
    CUDA_CHECK(cudaEventDestroy(after));
    return ok;
  }

  const Stats& stats(const std::string& name) const { return find(name).stats; }

  // The rate of a variant in the suite's metric (for "ms", its median time).
  double value(const std::string& name) const {
    const Stats& s = stats(name);
    if (work_.amount <= 0) return s.median_ms;
    return work_.amount / (s.median_ms * 1e-3) / work_.scale;
  }

  // Properties the grader reads (docs/authoring-a-lab.md, "What a perf test records").
  void record() const {
    using ::testing::Test;
    std::string names;
    for (const auto& v : variants_) names += (names.empty() ? "" : ",") + v.name;
    Test::RecordProperty("perf_metric", work_.metric);
    Test::RecordProperty("perf_work", fmt(work_.amount));
    Test::RecordProperty("perf_variants", names);
    if (!baseline_.empty()) Test::RecordProperty("perf_baseline", baseline_);
    if (!label_.empty()) Test::RecordProperty("perf_label", label_);
    if (floor_ms_ > 0) Test::RecordProperty("perf_floor_ms", fmt(floor_ms_));
    if (physical_floor_ms_ > 0) Test::RecordProperty("perf_physical_floor_ms", fmt(physical_floor_ms_));
    for (const auto& v : variants_) {
      Test::RecordProperty(v.name + ".median_ms", fmt(v.stats.median_ms));
      Test::RecordProperty(v.name + ".min_ms", fmt(v.stats.min_ms));
      Test::RecordProperty(v.name + ".mean_ms", fmt(v.stats.mean_ms));
      Test::RecordProperty(v.name + ".noise_pct", fmt(v.stats.noise_pct));
      Test::RecordProperty(v.name + ".samples", v.stats.samples);
      Test::RecordProperty(v.name + ".tail_ms", fmt(summarize(v.tails).median_ms));
      Test::RecordProperty(v.name + ".calls", v.calls);
      if (v.verify) Test::RecordProperty(v.name + ".verified", v.verified);
    }
    // A human-readable line in the test log as well; the properties are what counts.
    for (const auto& v : variants_) {
      std::printf("  %-12s median %9.4f ms  %10.2f %s  (noise %.2f %%, %d samples)\n", v.name.c_str(),
                  v.stats.median_ms, value(v.name), work_.metric, v.stats.noise_pct, v.stats.samples);
    }
  }

 private:
  struct Variant {
    std::string name;
    std::function<void()> fn;
    std::function<void(int)> prepare = {};
    std::function<bool(int)> verify = {};
    std::vector<double> samples = {};
    std::vector<double> tails = {};
    Stats stats = {};
    int calls = 0;     // calls made, warm-up ones included
    int verified = 0;  // calls whose output verify() found right
  };

  Variant& last() {
    if (variants_.empty()) throw std::logic_error("bench::Suite: prepare/verify before any add()");
    return variants_.back();
  }

  // After a call of v: verify it (when v has a verify), count it; false with a test failure when wrong.
  bool check(Variant& v) {
    const int call = v.calls++;
    if (!v.verify) return true;
    if (v.verify(call)) {
      ++v.verified;
      return true;
    }
    ADD_FAILURE() << "the output of call " << call << " of " << v.name
                  << " (inputs changed before every call) was wrong: a perf score counts only for work that "
                     "was done, and done right, within the timed call (no answer kept from an earlier call, "
                     "no work left running)";
    ::testing::Test::RecordProperty("perf_verify_failed", v.name);
    return false;
  }

  bool quiet() const {
    for (const auto& v : variants_) {
      if (summarize(v.samples).noise_pct > options_.max_noise_pct) return false;
    }
    return true;
  }
  const Variant& find(const std::string& name) const {
    for (const auto& v : variants_) {
      if (v.name == name) return v;
    }
    throw std::invalid_argument("bench::Suite: no variant named " + name);
  }
  static std::string fmt(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.10g", x);
    return buf;
  }

  Work work_;
  std::string label_;
  Options options_;
  std::vector<Variant> variants_;
  std::string baseline_;
  double floor_ms_ = 0;
  double physical_floor_ms_ = 0;
};

}  // namespace cudalab::bench
