// Lab 08 tests. Correctness tests judge; perf tests only measure (the grader scores speed).
#include <gtest/gtest.h>

#include <cub/device/device_histogram.cuh>

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <cudalab/bench.cuh>
#include <cudalab/check.cuh>
#include <cudalab/compare.hpp>
#include <cudalab/device_buffer.cuh>
#include <cudalab/gtest_cuda.hpp>
#include <cudalab/random.hpp>

#include "histogram.cuh"

namespace {

using cudalab::AllEqual;
using cudalab::DeviceBuffer;

constexpr std::uint64_t kSeed = 8008;
constexpr unsigned char kHotValue = 0xB7;  // the only byte of the hot-bin input: not 0, not 255

// --- Inputs ---------------------------------------------------------------------------------------

// uniform: every byte equally likely. hot: every byte equal (all threads hit one bin: the worst
// contention). skewed: geometric, mean 12 (a few bins hold most of the counts). runs: runs of 1-64
// equal bytes, so runs cross uint4, thread and block boundaries (catches run-merging bugs).
enum class Dist { kUniform, kHot, kSkewed, kRuns };

const char* dist_name(Dist d) {
  switch (d) {
    case Dist::kUniform: return "uniform";
    case Dist::kHot: return "hot";
    case Dist::kSkewed: return "skewed";
    case Dist::kRuns: return "runs";
  }
  return "?";
}

std::vector<unsigned char> generate_bytes(Dist d, std::size_t n, std::uint64_t seed) {
  std::vector<unsigned char> v(n);
  cudalab::Rng rng(seed);
  switch (d) {
    case Dist::kUniform:
      for (std::size_t i = 0; i < n; i += 8) {
        std::uint64_t r = rng.next();
        for (std::size_t k = i; k < std::min(n, i + 8); ++k, r >>= 8) v[k] = static_cast<unsigned char>(r);
      }
      break;
    case Dist::kHot:
      std::fill(v.begin(), v.end(), kHotValue);
      break;
    case Dist::kSkewed:
      for (auto& x : v) {
        const double g = std::floor(-std::log(1.0 - rng.uniform()) * 12.0);
        x = static_cast<unsigned char>(static_cast<unsigned>(std::min(g, 255.0)) ^ 0x2Cu);  // peak at bin 0x2C
      }
      break;
    case Dist::kRuns:
      for (std::size_t i = 0; i < n;) {
        const auto value = static_cast<unsigned char>(rng.next());
        const std::size_t len = 1 + rng.next() % 64;
        for (std::size_t k = i; k < std::min(n, i + len); ++k) v[k] = value;
        i += len;
      }
      break;
  }
  return v;
}

// Inputs are generated once per (distribution, size) and reused by every function's test.
const std::vector<unsigned char>& bytes_for(Dist d, std::size_t n) {
  static std::map<std::pair<int, std::size_t>, std::vector<unsigned char>> cache;
  auto key = std::make_pair(static_cast<int>(d), n);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, generate_bytes(d, n, kSeed + n)).first;
  return it->second;
}

std::vector<unsigned int> cpu_histogram(const std::vector<unsigned char>& in) {
  std::vector<unsigned int> bins(kNumBins, 0);
  for (unsigned char b : in) ++bins[b];
  return bins;
}

using HistogramFn = void (*)(const unsigned char*, std::size_t, unsigned int*);

// Runs fn on a fresh device copy of the input with poisoned bins (0xA5A5A5A5), returns the bins.
std::vector<unsigned int> run_histogram(HistogramFn fn, const std::vector<unsigned char>& in) {
  DeviceBuffer<unsigned char> d_in(in);
  DeviceBuffer<unsigned int> d_bins(kNumBins);
  cudalab::poison(d_bins);
  fn(d_in.data(), in.size(), d_bins.data());
  CUDA_CHECK(cudaDeviceSynchronize());
  return d_bins.to_host();
}

// --- Byte histograms: tasks 1, 2, 4 and the challenge -------------------------------------------------

struct Case {
  Dist dist;
  std::size_t n;
};

// 0 (bins must still be zeroed), 1, a partial uint4, one block's worth +-1, odd sizes, and sizes that
// need many grid-stride passes.
std::vector<Case> byte_cases() {
  std::vector<Case> cases{{Dist::kUniform, 0}};
  for (Dist d : {Dist::kUniform, Dist::kHot, Dist::kSkewed, Dist::kRuns}) {
    for (std::size_t n : {std::size_t{1}, std::size_t{15}, std::size_t{255}, std::size_t{257}, std::size_t{4099},
                          std::size_t{65531}, (std::size_t{1} << 20) + 3, (std::size_t{1} << 24) + 1}) {
      cases.push_back({d, n});
    }
  }
  return cases;
}

void PrintTo(const Case& c, std::ostream* os) { *os << dist_name(c.dist) << " bytes, n = " << c.n; }

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::string(dist_name(info.param.dist)) + "_" + std::to_string(info.param.n);
}

class HistogramCorrectness : public cudalab::GpuTestWithParam<Case> {
 protected:
  void check(HistogramFn fn, const char* name) {
    const Case c = GetParam();
    CUDALAB_SKIP_IF_LARGE(c.n);
    const auto& in = bytes_for(c.dist, c.n);
    EXPECT_TRUE(AllEqual(cpu_histogram(in), run_histogram(fn, in), kSeed + c.n))
        << name << " on " << dist_name(c.dist) << " bytes, n = " << c.n
        << " (index = bin; 2779096485 = 0xA5A5A5A5 means the bin was never zeroed)";
  }
};

TEST_P(HistogramCorrectness, Global) { check(histogram_global, "histogram_global"); }
TEST_P(HistogramCorrectness, Shared) { check(histogram_shared, "histogram_shared"); }
TEST_P(HistogramCorrectness, Coarsened) { check(histogram_coarsened, "histogram_coarsened"); }
TEST_P(HistogramCorrectness, Fast) { check(histogram_fast, "histogram_fast"); }

INSTANTIATE_TEST_SUITE_P(, HistogramCorrectness, ::testing::ValuesIn(byte_cases()), case_name);

// --- Task 3: text histogram ------------------------------------------------------------------------

// mixed: letters of both cases, digits, spaces, punctuation and bytes 128-255.
// edges: only the bytes next to the letter ranges ('@' '[' '`' '{') and letters with the high bit
// set (0xC1 = 'A' + 128, 0xE1 = 'a' + 128): a range check off by one, or a signed char, miscounts.
// shout: every byte 'Q' (upper case, all in one bin).
enum class Text { kMixed, kEdges, kShout };

struct TextCase {
  Text text;
  std::size_t n;
};

void PrintTo(const TextCase& c, std::ostream* os) { *os << "text kind " << static_cast<int>(c.text) << ", n = " << c.n; }

std::vector<char> generate_text(Text t, std::size_t n, std::uint64_t seed) {
  static const char kPunct[] = " ,.;:!?'\"-()\n";
  static const unsigned char kEdges[] = {'@', 'A', 'Z', '[', '`', 'a', 'z', '{', 0xC1, 0xE1, 0xDA, 0xFA, 0x80, 0xFF};
  cudalab::Rng rng(seed);
  std::vector<char> v(n);
  for (auto& c : v) {
    unsigned char x = 'Q';
    if (t == Text::kEdges) {
      x = kEdges[rng.next() % sizeof kEdges];
    } else if (t == Text::kMixed) {
      const auto r = rng.next() % 100;
      if (r < 45) x = static_cast<unsigned char>('a' + rng.next() % 26);
      else if (r < 65) x = static_cast<unsigned char>('A' + rng.next() % 26);
      else if (r < 72) x = static_cast<unsigned char>('0' + rng.next() % 10);
      else if (r < 85) x = static_cast<unsigned char>(kPunct[rng.next() % (sizeof kPunct - 1)]);
      else x = static_cast<unsigned char>(128 + rng.next() % 128);
    }
    c = static_cast<char>(x);
  }
  return v;
}

std::vector<unsigned int> cpu_text_histogram(const std::vector<char>& text) {
  std::vector<unsigned int> bins(kTextBins, 0);
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 'a' && c <= 'z') ++bins[(c - 'a') / 4];
    if (c >= 'A' && c <= 'Z') ++bins[(c - 'A') / 4];
  }
  return bins;
}

class HistogramTextCorrectness : public cudalab::GpuTestWithParam<TextCase> {};

TEST_P(HistogramTextCorrectness, Letters) {
  const TextCase c = GetParam();
  CUDALAB_SKIP_IF_LARGE(c.n);
  const std::uint64_t seed = kSeed + 3 * c.n + static_cast<int>(c.text);
  const auto text = generate_text(c.text, c.n, seed);
  DeviceBuffer<char> d_text(text);
  DeviceBuffer<unsigned int> d_bins(kTextBins);
  cudalab::poison(d_bins);
  histogram_text(d_text.data(), text.size(), d_bins.data());
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_TRUE(AllEqual(cpu_text_histogram(text), d_bins.to_host(), seed))
      << "bins: a-d, e-h, i-l, m-p, q-t, u-x, y-z; n = " << c.n;
}

std::vector<TextCase> text_cases() {
  std::vector<TextCase> cases;
  for (Text t : {Text::kMixed, Text::kEdges, Text::kShout}) {
    for (std::size_t n : {std::size_t{1}, std::size_t{255}, std::size_t{257}, std::size_t{4099}, std::size_t{65531},
                          (std::size_t{1} << 20) + 3, (std::size_t{1} << 24) + 1}) {
      cases.push_back({t, n});
    }
  }
  return cases;
}

std::string text_case_name(const ::testing::TestParamInfo<TextCase>& info) {
  static const char* const kNames[] = {"mixed", "edges", "shout"};
  return std::string(kNames[static_cast<int>(info.param.text)]) + "_" + std::to_string(info.param.n);
}

INSTANTIATE_TEST_SUITE_P(, HistogramTextCorrectness, ::testing::ValuesIn(text_cases()), text_case_name);

// --- Perf ----------------------------------------------------------------------------------------

// GB/s of input bytes read (N / t). Every student step beside cub::DeviceHistogram::HistogramEven
// (256 bins: 257 levels from 0 to 256), on the same buffer; the floor is N bytes at copy speed.
void time_histograms(Dist d, std::size_t n) {
  const auto in = d == Dist::kHot ? std::vector<unsigned char>(n, kHotValue) : generate_bytes(d, n, kSeed + 11);
  const auto expected = cpu_histogram(in);
  DeviceBuffer<unsigned char> d_in(in);
  DeviceBuffer<unsigned int> d_bins(kNumBins);

  auto correct = [&](HistogramFn fn) {
    cudalab::poison(d_bins);
    fn(d_in.data(), n, d_bins.data());
    CUDA_CHECK(cudaDeviceSynchronize());
    return static_cast<bool>(AllEqual(expected, d_bins.to_host(), kSeed + 11));
  };
  if (!correct(histogram_fast)) CUDALAB_SKIP("histogram_fast is incorrect at this size: not timed");

  std::size_t temp_bytes = 0;
  const int samples = static_cast<int>(n);
  CUDA_CHECK(cub::DeviceHistogram::HistogramEven(nullptr, temp_bytes, d_in.data(), d_bins.data(), kNumBins + 1, 0,
                                                 kNumBins, samples));
  DeviceBuffer<unsigned char> d_temp(std::max<std::size_t>(temp_bytes, 1));

  cudalab::bench::Suite suite(cudalab::bench::Work::bytes(static_cast<double>(n)),
                              "N = 2^" + std::to_string(static_cast<int>(std::log2(static_cast<double>(n)))) + ", " +
                                  (d == Dist::kHot ? "hot bin" : "uniform") + " bytes");
  suite.add("impl", [&] { histogram_fast(d_in.data(), n, d_bins.data()); });
  suite.add("cub", [&] {
    std::size_t bytes = temp_bytes;
    CUDA_CHECK(cub::DeviceHistogram::HistogramEven(d_temp.data(), bytes, d_in.data(), d_bins.data(), kNumBins + 1, 0,
                                                   kNumBins, samples));
  });
  // The earlier steps, where they are correct, so the chart shows what each one bought.
  if (correct(histogram_coarsened)) suite.add("coarsened", [&] { histogram_coarsened(d_in.data(), n, d_bins.data()); });
  if (correct(histogram_shared)) suite.add("shared", [&] { histogram_shared(d_in.data(), n, d_bins.data()); });
  if (correct(histogram_global)) suite.add("global", [&] { histogram_global(d_in.data(), n, d_bins.data()); });
  suite.baseline("cub").floor_ms(cudalab::bench::copy_floor_ms(static_cast<double>(n)));
  suite.run();
  suite.record();
}

class HistogramPerf : public cudalab::GpuTestWithParam<std::size_t> {};

TEST_P(HistogramPerf, Uniform) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  time_histograms(Dist::kUniform, GetParam());
}

TEST_P(HistogramPerf, HotBin) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  time_histograms(Dist::kHot, GetParam());
}

INSTANTIATE_TEST_SUITE_P(, HistogramPerf, ::testing::Values(std::size_t{1} << 24, std::size_t{1} << 28),
                         cudalab::SizeName());

}  // namespace
