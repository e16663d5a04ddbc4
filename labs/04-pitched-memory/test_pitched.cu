// Lab 04 tests. Correctness tests judge; perf tests only measure (the grader scores speed).
#include <gtest/gtest.h>
#include <thrust/count.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/transform.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
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
#include <cudalab/random.hpp>

#include "pitched.cuh"

namespace {

using cudalab::AllEqual;
using cudalab::AllNear;
using cudalab::DeviceBuffer;
using cudalab::Shape2D;

constexpr std::uint64_t kSeed = 4004;
constexpr unsigned char kPoison = 0xFF;  // every poisoned float reads as NaN
constexpr float kA = 2.5f, kB = 7.25f;   // the map: inputs in [1, 100) give outputs in [9.75, 257.25)

struct Size2D {
  int width, height;
};
void PrintTo(const Size2D& s, std::ostream* os) { *os << s.width << " wide x " << s.height << " high"; }
std::string size_name(const ::testing::TestParamInfo<Size2D>& info) {
  return "w" + std::to_string(info.param.width) + "_h" + std::to_string(info.param.height);
}

// Widths that are not multiples of 32 (1, 33, 1000, 8190: rows of 4, 132, 4000, 32760 bytes, all
// padded) and one whose rows need no padding (256 floats = 1024 bytes).
const std::vector<Size2D> kSizes = {{1, 1},    {1, 7},     {1, 512},    {33, 1},   {33, 7},   {33, 512},
                                    {1000, 1}, {1000, 7},  {1000, 512}, {8190, 1}, {8190, 7}, {8190, 512},
                                    {256, 5},  {77, 41}};

std::size_t elements(const Size2D& s) { return static_cast<std::size_t>(s.width) * s.height; }

// How a test lays out a pitched array. By default the pitch is cudaMallocPitch's for rows of
// width * 4 + extra_row_bytes bytes; with own_pitch, the test picks the pitch (any multiple of 4, as the
// contract allows) and allocates with cudaMalloc. The image may start col_offset floats into each row.
struct Layout {
  std::size_t extra_row_bytes = 0;
  bool guard_rows = true;
  std::size_t own_pitch = 0;  // bytes; 0: cudaMallocPitch chooses
  int col_offset = 0;         // floats before the image in every row
};

// Byte fill of everything outside the image rows: kPoison for outputs (a write there changes it),
// random junk for inputs (a read from there spoils the answer, whatever the arithmetic does with it).
enum class Fill { poison, junk };

// A pitched allocation the test owns. With guard rows, the image starts one row into the allocation
// and 4 * height + 1 rows follow it, so a kernel that steps rows by the wrong amount (the width, or the
// pitch counted in floats) stays inside the allocation, where the test sees it, instead of faulting.
class PitchedBuffer {
 public:
  PitchedBuffer(int width, int height, std::size_t extra_row_bytes, bool guard_rows, Fill fill = Fill::poison)
      : PitchedBuffer(width, height, Layout{extra_row_bytes, guard_rows, 0, 0}, fill) {}
  PitchedBuffer(int width, int height, const Layout& layout, Fill fill = Fill::poison)
      : width_(width), height_(height), col_offset_(layout.col_offset), first_row_(layout.guard_rows ? 1 : 0),
        rows_(layout.guard_rows ? 4 * static_cast<std::size_t>(height) + 2 : height) {
    if (layout.own_pitch != 0) {
      pitch_ = layout.own_pitch;
      CUDA_CHECK(cudaMalloc(&base_, pitch_ * rows_));
    } else {
      CUDA_CHECK(cudaMallocPitch(&base_, &pitch_, (col_offset_ + width) * sizeof(float) + layout.extra_row_bytes, rows_));
    }
    if (fill == Fill::junk) {
      cudalab::random_fill(static_cast<std::uint32_t*>(base_), pitch_ * rows_ / 4, kSeed + pitch_ + rows_, 0u, ~0u);
    } else {
      CUDA_CHECK(cudaMemset(base_, kPoison, pitch_ * rows_));
    }
  }
  PitchedBuffer(const PitchedBuffer&) = delete;
  PitchedBuffer& operator=(const PitchedBuffer&) = delete;
  ~PitchedBuffer() { cudaFree(base_); }

  float* image() {
    return reinterpret_cast<float*>(static_cast<char*>(base_) + first_row_ * pitch_ + col_offset_ * sizeof(float));
  }
  std::size_t pitch() const { return pitch_; }
  std::size_t row_bytes() const { return static_cast<std::size_t>(width_) * sizeof(float); }

  void upload(const std::vector<float>& host) {
    if (width_ == 0 || height_ == 0) return;
    CUDA_CHECK(cudaMemcpy2D(image(), pitch_, host.data(), row_bytes(), row_bytes(), height_, cudaMemcpyHostToDevice));
  }
  std::vector<unsigned char> all_bytes() const {
    std::vector<unsigned char> bytes(pitch_ * rows_);
    CUDA_CHECK(cudaMemcpy(bytes.data(), base_, bytes.size(), cudaMemcpyDeviceToHost));
    return bytes;
  }

  // Checks the image rows against `expected` and that every other byte (padding, the bytes before
  // col_offset, guard rows) is still poison. Two assertions: values, then untouched bytes.
  template <class E>
  void expect_image(const std::vector<E>& expected, cudalab::Tolerance tol, std::uint64_t seed,
                    const std::string& what) const {
    const std::vector<unsigned char> bytes = all_bytes();
    std::vector<float> image(static_cast<std::size_t>(width_) * height_);
    const std::size_t data_begin = col_offset_ * sizeof(float);
    std::size_t touched = 0;
    std::string first;
    for (std::size_t r = 0; r < rows_; ++r) {
      const bool in_image = r >= first_row_ && r < first_row_ + height_;
      const std::size_t data_end = in_image ? data_begin + row_bytes() : 0;
      if (in_image && width_ > 0) {
        std::memcpy(&image[(r - first_row_) * width_], &bytes[r * pitch_ + data_begin], row_bytes());
      }
      for (std::size_t c = 0; c < pitch_; ++c) {
        if (in_image && c >= data_begin && c < data_end) continue;
        if (bytes[r * pitch_ + c] != kPoison && touched++ == 0) {
          first = in_image ? (c < data_begin ? "before" : "padding of") + std::string(" image row ") +
                                 std::to_string(r - first_row_) + ", byte " + std::to_string(c) + " of the row"
                           : (r < first_row_ ? "the row above the image"
                                             : std::to_string(r - first_row_ - height_ + 1) + " rows below the image");
        }
      }
    }
    const Shape2D shape{static_cast<std::size_t>(height_), static_cast<std::size_t>(width_)};
    EXPECT_TRUE(AllNear(expected, image, tol, seed, shape))
        << what << ", " << width_ << " x " << height_ << ", pitch " << pitch_ << " B ([row y, col x])";
    EXPECT_EQ(touched, 0u) << what << " wrote " << touched << " bytes outside the image rows (first: " << first
                           << "). Rows are pitch = " << pitch_ << " bytes apart, not width * 4 = " << row_bytes()
                           << "; threads past width or height must do nothing";
  }

 private:
  void* base_ = nullptr;
  std::size_t pitch_ = 0;
  int width_, height_;
  std::size_t col_offset_, first_row_, rows_;
};

// Layouts with pitches the test picks (contract: any multiple of 4, possibly different for in and out):
// the input's rows are packed (pitch = width * 4: no padding at all), and the output's image starts one
// float into rows of width + 3 floats, so the float before and the two after each row must stay as they
// were.
Layout packed_input(int width) { return Layout{0, true, static_cast<std::size_t>(width) * sizeof(float), 0}; }
Layout offset_output(int width) { return Layout{0, true, (static_cast<std::size_t>(width) + 3) * sizeof(float), 1}; }

// --- Task 1: upload and download -----------------------------------------------------------------

class PitchedTransferCorrectness : public cudalab::GpuTestWithParam<Size2D> {};

TEST_P(PitchedTransferCorrectness, Upload) {
  const Size2D s = GetParam();
  CUDALAB_SKIP_IF_LARGE(elements(s));
  const auto host = cudalab::random_vector<float>(elements(s), kSeed + elements(s), 1.0f, 100.0f);
  void* probe = nullptr;
  std::size_t expected_pitch = 0;
  CUDA_CHECK(cudaMallocPitch(&probe, &expected_pitch, s.width * sizeof(float), s.height));
  CUDA_CHECK(cudaFree(probe));

  PitchedImage image = upload_pitched(host, s.width, s.height);
  ASSERT_NE(image.data, nullptr) << "upload_pitched returned no device memory";
  EXPECT_EQ(image.width, s.width);
  EXPECT_EQ(image.height, s.height);
  const std::size_t pitch = image.pitch;
  EXPECT_EQ(pitch, expected_pitch) << "cudaMallocPitch gives rows of " << s.width * sizeof(float)
                                   << " bytes a pitch of " << expected_pitch << " bytes";
  if (pitch >= s.width * sizeof(float)) {
    std::vector<unsigned char> bytes(pitch * s.height);
    CUDA_CHECK(cudaMemcpy(bytes.data(), image.data, bytes.size(), cudaMemcpyDeviceToHost));
    std::vector<float> rows(elements(s));
    for (int y = 0; y < s.height; ++y) {
      std::memcpy(&rows[static_cast<std::size_t>(y) * s.width], &bytes[y * pitch], s.width * sizeof(float));
    }
    EXPECT_TRUE(AllEqual(host, rows, kSeed + elements(s), Shape2D{static_cast<std::size_t>(s.height),
                                                                   static_cast<std::size_t>(s.width)}))
        << "row y of the device array starts at data + y * pitch bytes ([row y, col x])";
  }
  CUDA_CHECK(cudaFree(image.data));
}

// The test builds the pitched array (padding poisoned with NaN) and download_pitched must return
// exactly the rows.
TEST_P(PitchedTransferCorrectness, Download) {
  const Size2D s = GetParam();
  CUDALAB_SKIP_IF_LARGE(elements(s));
  const auto host = cudalab::random_vector<float>(elements(s), kSeed + 2 * elements(s), 1.0f, 100.0f);
  PitchedBuffer buffer(s.width, s.height, 0, false);
  buffer.upload(host);
  const PitchedImage image{buffer.image(), buffer.pitch(), s.width, s.height};
  const std::vector<float> got = download_pitched(image);
  EXPECT_TRUE(AllEqual(host, got, kSeed + 2 * elements(s),
                       Shape2D{static_cast<std::size_t>(s.height), static_cast<std::size_t>(s.width)}))
      << "pitch " << buffer.pitch() << " B; NaN means a padding byte was copied (source pitch taken as width * 4?)";
}
// The same from an array whose pitch the test chose (width + 5 floats: not a cudaMallocPitch pitch) and
// whose rows start one float into each pitch: download_pitched must use image.pitch as it is.
TEST_P(PitchedTransferCorrectness, DownloadOwnPitch) {
  const Size2D s = GetParam();
  CUDALAB_SKIP_IF_LARGE(elements(s));
  const auto host = cudalab::random_vector<float>(elements(s), kSeed + 13 * elements(s), 1.0f, 100.0f);
  PitchedBuffer buffer(s.width, s.height, Layout{0, false, (static_cast<std::size_t>(s.width) + 5) * sizeof(float), 1});
  buffer.upload(host);
  const PitchedImage image{buffer.image(), buffer.pitch(), s.width, s.height};
  const std::vector<float> got = download_pitched(image);
  EXPECT_TRUE(AllEqual(host, got, kSeed + 13 * elements(s),
                       Shape2D{static_cast<std::size_t>(s.height), static_cast<std::size_t>(s.width)}))
      << "pitch " << buffer.pitch() << " B (width + 5 floats); NaN means a padding byte was copied";
}
INSTANTIATE_TEST_SUITE_P(, PitchedTransferCorrectness, ::testing::ValuesIn(kSizes), size_name);

class PitchedMemoryCorrectness : public cudalab::GpuTest {};

// Every cudaMallocPitch needs its cudaFree: 32 uploads of 16 MiB would leak 512 MiB otherwise.
TEST_F(PitchedMemoryCorrectness, FreeReleasesEverything) {
  const Size2D s{8190, 512};
  const auto host = cudalab::random_vector<float>(elements(s), kSeed, 1.0f, 2.0f);
  PitchedImage image = upload_pitched(host, s.width, s.height);  // the first call may grow pools
  ASSERT_NE(image.data, nullptr) << "upload_pitched returned no device memory";
  free_pitched(image);
  EXPECT_EQ(image.data, nullptr) << "free_pitched should reset the image to PitchedImage{}";
  EXPECT_EQ(image.pitch, 0u) << "free_pitched should reset the image to PitchedImage{}";
  // The tally counts this process's own allocations, so another process on the GPU changes nothing.
  const cudalab::ResourceTally before = cudalab::resource_tally();
  for (int i = 0; i < 32; ++i) {
    PitchedImage again = upload_pitched(host, s.width, s.height);
    free_pitched(again);
  }
  const std::string kept = cudalab::held_beyond(before);
  EXPECT_TRUE(kept.empty()) << "32 more upload/free pairs kept " << kept << ": free_pitched must cudaFree the data";
}

// --- Task 2 and challenge: the map ---------------------------------------------------------------

// in and out have different pitches (out's rows carry 1000 extra bytes), so a kernel that uses one
// pitch for both arrays fails. The input's bytes outside the image are junk, the output's are poison.
template <class Map>
void check_map(const Size2D& s, std::uint64_t seed, const std::string& what, Map map,
               const Layout& in_layout = Layout{0, true, 0, 0}, const Layout& out_layout = Layout{1000, true, 0, 0}) {
  const auto host = cudalab::random_vector<float>(elements(s), seed, 1.0f, 100.0f);
  std::vector<double> expected(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) expected[i] = static_cast<double>(kA) * host[i] + kB;
  PitchedBuffer in(s.width, s.height, in_layout, Fill::junk), out(s.width, s.height, out_layout);
  in.upload(host);
  map(in.image(), in.pitch(), out.image(), out.pitch());
  CUDA_CHECK(cudaDeviceSynchronize());
  out.expect_image(expected, {1e-6, 1e-6}, seed, what);
}

class PitchedMapCorrectness : public cudalab::GpuTestWithParam<Size2D> {};

TEST_P(PitchedMapCorrectness, MapAffine) {
  const Size2D s = GetParam();
  CUDALAB_SKIP_IF_LARGE(elements(s));
  check_map(s, kSeed + 3 * elements(s), "map_affine", [&](const float* in, std::size_t ip, float* out, std::size_t op) {
    map_affine(in, ip, out, op, s.width, s.height, kA, kB);
  });
}
// Pitches the test chose: packed input rows, output rows of width + 3 floats starting one float in.
TEST_P(PitchedMapCorrectness, OwnPitches) {
  const Size2D s = GetParam();
  CUDALAB_SKIP_IF_LARGE(elements(s));
  check_map(
      s, kSeed + 17 * elements(s), "map_affine (own pitches)",
      [&](const float* in, std::size_t ip, float* out, std::size_t op) { map_affine(in, ip, out, op, s.width, s.height, kA, kB); },
      packed_input(s.width), offset_output(s.width));
}
INSTANTIATE_TEST_SUITE_P(, PitchedMapCorrectness, ::testing::ValuesIn(kSizes), size_name);

class PitchedFastCorrectness : public cudalab::GpuTestWithParam<Size2D> {};

TEST_P(PitchedFastCorrectness, MapAffineFast) {
  const Size2D s = GetParam();
  CUDALAB_SKIP_IF_LARGE(elements(s));
  check_map(s, kSeed + 5 * elements(s), "map_affine_fast",
            [&](const float* in, std::size_t ip, float* out, std::size_t op) {
              map_affine_fast(in, ip, out, op, s.width, s.height, kA, kB);
            });
}
TEST_P(PitchedFastCorrectness, OwnPitches) {
  const Size2D s = GetParam();
  CUDALAB_SKIP_IF_LARGE(elements(s));
  check_map(
      s, kSeed + 19 * elements(s), "map_affine_fast (own pitches)",
      [&](const float* in, std::size_t ip, float* out, std::size_t op) {
        map_affine_fast(in, ip, out, op, s.width, s.height, kA, kB);
      },
      packed_input(s.width), offset_output(s.width));
}
INSTANTIATE_TEST_SUITE_P(, PitchedFastCorrectness,
                         ::testing::Values(Size2D{1, 1}, Size2D{1, 7}, Size2D{1, 512}, Size2D{33, 1}, Size2D{33, 7},
                                           Size2D{33, 512}, Size2D{1000, 1}, Size2D{1000, 7}, Size2D{1000, 512},
                                           Size2D{8190, 1}, Size2D{8190, 7}, Size2D{8190, 512}, Size2D{256, 5},
                                           Size2D{77, 41}, Size2D{8190, 33}, Size2D{31, 1025}),
                         size_name);

// --- Task 3: the 3x3 filter ----------------------------------------------------------------------

// The reference: clamp-to-edge, w[r * 3 + c] weighs the pixel (x + c - 1, y + r - 1), in float64.
std::vector<double> reference_filter(const std::vector<float>& in, const Size2D& s, const float w[9]) {
  std::vector<double> out(in.size());
  auto clamp = [](int v, int hi) { return v < 0 ? 0 : (v > hi ? hi : v); };
  for (int y = 0; y < s.height; ++y) {
    for (int x = 0; x < s.width; ++x) {
      double sum = 0;
      for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < 3; ++c) {
          const int yy = clamp(y + r - 1, s.height - 1), xx = clamp(x + c - 1, s.width - 1);
          sum += static_cast<double>(w[r * 3 + c]) * in[static_cast<std::size_t>(yy) * s.width + xx];
        }
      }
      out[static_cast<std::size_t>(y) * s.width + x] = sum;
    }
  }
  return out;
}

// Nine different weights, none symmetric to another, so a flipped or transposed stencil fails.
std::vector<float> filter_weights(std::uint64_t seed, float lo, float hi) {
  return cudalab::random_vector<float>(9, seed, lo, hi);
}

// The input's bytes outside the image (padding, guard rows) are junk: a read there spoils the sum.
void check_filter(const Size2D& s, const std::vector<float>& w, std::uint64_t seed,
                  const Layout& in_layout = Layout{0, true, 0, 0}, const Layout& out_layout = Layout{1000, true, 0, 0}) {
  const auto host = cudalab::random_vector<float>(elements(s), seed, 1.0f, 2.0f);
  const auto expected = reference_filter(host, s, w.data());
  PitchedBuffer in(s.width, s.height, in_layout, Fill::junk), out(s.width, s.height, out_layout);
  in.upload(host);
  filter3x3(in.image(), in.pitch(), out.image(), out.pitch(), s.width, s.height);
  CUDA_CHECK(cudaDeviceSynchronize());
  // Nine products summed in float: a few units in the last place of a sum near 10.
  out.expect_image(expected, {1e-5, 1e-5}, seed,
                   "filter3x3 (clamp-to-edge; wrong values at an edge mean a read outside the image rows)");
}

class PitchedFilterCorrectness : public cudalab::GpuTestWithParam<Size2D> {};

TEST_P(PitchedFilterCorrectness, Filter3x3) {
  const Size2D s = GetParam();
  CUDALAB_SKIP_IF_LARGE(elements(s));
  const auto w = filter_weights(kSeed + 77, 0.25f, 1.25f);
  set_filter_weights(w.data());
  check_filter(s, w, kSeed + 7 * elements(s));
}
TEST_P(PitchedFilterCorrectness, OwnPitches) {
  const Size2D s = GetParam();
  CUDALAB_SKIP_IF_LARGE(elements(s));
  const auto w = filter_weights(kSeed + 79, 0.25f, 1.25f);
  set_filter_weights(w.data());
  check_filter(s, w, kSeed + 23 * elements(s), packed_input(s.width), offset_output(s.width));
}
INSTANTIATE_TEST_SUITE_P(, PitchedFilterCorrectness, ::testing::ValuesIn(kSizes), size_name);

class PitchedFilterWeightsCorrectness : public cudalab::GpuTest {};

// New weights must take effect: the kernel reads them from constant memory on every call.
TEST_F(PitchedFilterWeightsCorrectness, NewWeightsTakeEffect) {
  const Size2D s{77, 41};
  const auto w1 = filter_weights(kSeed + 101, 0.25f, 1.25f);
  const auto w2 = filter_weights(kSeed + 202, -1.25f, -0.25f);
  set_filter_weights(w1.data());
  check_filter(s, w1, kSeed + 11);
  set_filter_weights(w2.data());
  check_filter(s, w2, kSeed + 12);
}

// --- Empty images: nothing to do, nothing launched, nothing written --------------------------------

class PitchedEmptyCorrectness : public cudalab::GpuTest {
 protected:
  // Calls f(in, in_pitch, out, out_pitch, width, height) with a zero width or height on real 33 x 7
  // arrays: no error (a launch with a zero grid is one), and every byte of out keeps its poison.
  template <class F>
  void expect_nothing_written(const char* what, F f) {
    const Size2D s{33, 7};
    for (const Size2D empty : {Size2D{0, 7}, Size2D{33, 0}, Size2D{0, 0}}) {
      PitchedBuffer in(s.width, s.height, 0, true, Fill::junk), out(s.width, s.height, 1000, true);
      f(in.image(), in.pitch(), out.image(), out.pitch(), empty.width, empty.height);
      CUDA_CHECK(cudaDeviceSynchronize());
      const auto bytes = out.all_bytes();
      std::size_t touched = 0;
      for (unsigned char b : bytes) touched += b != kPoison;
      EXPECT_EQ(touched, 0u) << what << " on a " << empty.width << " x " << empty.height
                             << " image wrote " << touched << " bytes: an empty image has nothing to write";
    }
  }
};

TEST_F(PitchedEmptyCorrectness, MapAffine) {
  expect_nothing_written("map_affine", [](const float* in, std::size_t ip, float* out, std::size_t op, int w, int h) {
    map_affine(in, ip, out, op, w, h, kA, kB);
  });
}

TEST_F(PitchedEmptyCorrectness, MapAffineFast) {
  expect_nothing_written("map_affine_fast", [](const float* in, std::size_t ip, float* out, std::size_t op, int w, int h) {
    map_affine_fast(in, ip, out, op, w, h, kA, kB);
  });
}

TEST_F(PitchedEmptyCorrectness, Filter3x3) {
  const auto w = filter_weights(kSeed + 83, 0.25f, 1.25f);
  set_filter_weights(w.data());
  expect_nothing_written("filter3x3", [](const float* in, std::size_t ip, float* out, std::size_t op, int width,
                                         int height) { filter3x3(in, ip, out, op, width, height); });
}

// --- Arrays past 2 GiB --------------------------------------------------------------------------

// Element i of a pitched output (row i / width) is not a * in + b within the tolerance: the float64
// reference of check_map, evaluated on the device so that no call needs a large download.
struct AffineMismatch {
  const char* in;
  std::size_t in_pitch;
  const char* out;
  std::size_t out_pitch;
  std::size_t width;
  float a, b;
  cudalab::Tolerance tol;
  __host__ __device__ bool operator()(std::size_t i) const {
    const std::size_t y = i / width, x = i % width;
    const double expected = static_cast<double>(a) * reinterpret_cast<const float*>(in + y * in_pitch)[x] + b;
    const double actual = reinterpret_cast<const float*>(out + y * out_pitch)[x];
    return !(fabs(actual - expected) <= tol.abs + tol.rel * fabs(expected));  // NaN is a mismatch
  }
};

// Word w (4 bytes) of an output allocation lies outside the image and no longer holds the poison.
struct TouchedOutside {
  const std::uint32_t* words;
  std::size_t front, pitch, row_bytes, height;
  __host__ __device__ bool operator()(std::size_t w) const {
    const std::size_t byte = 4 * w;
    if (byte >= front) {
      const std::size_t r = (byte - front) / pitch, c = (byte - front) % pitch;
      if (r < height && c < row_bytes) return false;  // an image element
    }
    return words[w] != 0xFFFFFFFFu;
  }
};

class PitchedHugeCorrectness : public cudalab::GpuTest {
 protected:
  // An 8000 x 67200 image whose rows end past 2^31 bytes in both arrays: an int byte offset y * pitch
  // wraps there (to 2 GiB before the image). Pitches the contract allows but cudaMallocPitch would
  // not give: 32004 B in, 32768 B out. Each allocation keeps 2 GiB in front of its image, so wrapped
  // offsets land in memory the test owns (junk in the input, poison in the output) rather than
  // faulting. About 8 GiB in all; inputs are made, and results checked, on the device.
  template <class Map>
  void check_huge(const char* what, Map map) {
    constexpr int kW = 8000, kH = 67200;
    constexpr std::size_t kInPitch = 32004, kOutPitch = 32768, kFront = std::size_t{1} << 31;
    constexpr std::size_t kInBytes = kFront + kH * kInPitch, kOutBytes = kFront + kH * kOutPitch;
    static_assert(kH * kInPitch > kFront && kH * kOutPitch > kFront, "the last rows start past 2^31 bytes");
    CUDALAB_SKIP_IF_LARGE(static_cast<std::size_t>(kW) * kH);
    CUDALAB_SKIP_UNLESS_GPU_MEMORY(kInBytes + kOutBytes);
    DeviceBuffer<unsigned char> in(kInBytes), out(kOutBytes);
    cudalab::random_fill(reinterpret_cast<std::uint32_t*>(in.data()), kFront / 4, kSeed + 29, 0u, ~0u);
    float* const in_image = reinterpret_cast<float*>(in.data() + kFront);
    cudalab::random_fill(in_image, kH * kInPitch / 4, kSeed + 31, 1.0f, 100.0f);  // rows and padding
    out.fill_bytes(kPoison);
    float* const out_image = reinterpret_cast<float*>(out.data() + kFront);
    map(in_image, kInPitch, out_image, kOutPitch, kW, kH);
    CUDA_CHECK(cudaDeviceSynchronize());
    const std::size_t n = static_cast<std::size_t>(kW) * kH;
    const AffineMismatch mismatch{reinterpret_cast<const char*>(in_image), kInPitch,
                                  reinterpret_cast<const char*>(out_image), kOutPitch, kW, kA, kB, {1e-6, 1e-6}};
    const auto wrong = thrust::count_if(thrust::device, thrust::counting_iterator<std::size_t>(0),
                                        thrust::counting_iterator<std::size_t>(n), mismatch);
    EXPECT_EQ(wrong, 0) << what << ": " << wrong << " of " << n << " elements of a " << kW << " x " << kH
                        << " image are wrong; its rows past " << kFront / kOutPitch
                        << " start more than 2^31 bytes in: compute y * pitch in std::size_t";
    const TouchedOutside touched_outside{reinterpret_cast<const std::uint32_t*>(out.data()), kFront, kOutPitch,
                                         kW * sizeof(float), kH};
    const auto touched = thrust::count_if(thrust::device, thrust::counting_iterator<std::size_t>(0),
                                          thrust::counting_iterator<std::size_t>(kOutBytes / 4), touched_outside);
    EXPECT_EQ(touched, 0) << what << " wrote " << touched << " floats outside the image rows";
  }
};

TEST_F(PitchedHugeCorrectness, MapAffineBeyond2GiB) {
  check_huge("map_affine", [](const float* in, std::size_t ip, float* out, std::size_t op, int w, int h) {
    map_affine(in, ip, out, op, w, h, kA, kB);
  });
}

TEST_F(PitchedHugeCorrectness, MapAffineFastBeyond2GiB) {
  check_huge("map_affine_fast", [](const float* in, std::size_t ip, float* out, std::size_t op, int w, int h) {
    map_affine_fast(in, ip, out, op, w, h, kA, kB);
  });
}

// --- Perf ----------------------------------------------------------------------------------------

class PitchedPerf : public cudalab::GpuTest {};

// GB/s = 8 W H / t (every element read once and written once; padding excluded), W = 8190, H = 8192,
// against a 1D device-to-device cudaMemcpy of the same 4 W H bytes (the anchor) and cudaMemcpy2D
// between the same pitched arrays.
TEST_F(PitchedPerf, MapAffineFast) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  const Size2D s{8190, 8192};
  const std::size_t n = elements(s);
  const cudalab::Tolerance tol{1e-6, 1e-6};  // as check_map's
  const auto host = cudalab::random_vector<float>(n, kSeed + 9, 1.0f, 100.0f);
  std::vector<float> expected(n);
  for (std::size_t i = 0; i < n; ++i) expected[i] = static_cast<float>(static_cast<double>(kA) * host[i] + kB);
  PitchedBuffer in(s.width, s.height, 0, false), out(s.width, s.height, 0, false);
  in.upload(host);
  const std::size_t row_bytes = s.width * sizeof(float);
  auto download = [&] {
    std::vector<float> result(n);
    CUDA_CHECK(cudaMemcpy2D(result.data(), row_bytes, out.image(), out.pitch(), row_bytes, s.height,
                            cudaMemcpyDeviceToHost));
    return result;
  };

  map_affine_fast(in.image(), in.pitch(), out.image(), out.pitch(), s.width, s.height, kA, kB);
  CUDA_CHECK(cudaDeviceSynchronize());
  if (!AllNear(expected, download(), tol, kSeed + 9)) {
    CUDALAB_SKIP("map_affine_fast is incorrect at this size: not timed");
  }
  CUDA_CHECK(cudaMemset(out.image(), kPoison, out.pitch() * s.height));
  map_affine(in.image(), in.pitch(), out.image(), out.pitch(), s.width, s.height, kA, kB);
  CUDA_CHECK(cudaDeviceSynchronize());
  const bool simple_ok = static_cast<bool>(AllNear(expected, download(), tol, kSeed + 9));

  DeviceBuffer<float> d_src(host), d_dst(n);
  const double bytes = 8.0 * n;
  cudalab::bench::Suite suite(cudalab::bench::Work::bytes(bytes),
                              "8190 x 8192 floats, pitch " + std::to_string(in.pitch()) + " B");
  // Before every impl call: the input negated in place (exact; its padding too, which nobody reads) and
  // the output poisoned, so an answer kept from the previous call, or none at all, fails verify.
  float* const in_rows = in.image();
  const std::size_t in_floats = in.pitch() / sizeof(float) * s.height;
  const AffineMismatch mismatch{reinterpret_cast<const char*>(in.image()), in.pitch(),
                                reinterpret_cast<const char*>(out.image()), out.pitch(),
                                static_cast<std::size_t>(s.width), kA, kB, tol};
  suite.add("impl",
            [&] { map_affine_fast(in.image(), in.pitch(), out.image(), out.pitch(), s.width, s.height, kA, kB); })
      .prepare([&](int) {
        thrust::transform(thrust::device, in_rows, in_rows + in_floats, in_rows, thrust::negate<float>());
        CUDA_CHECK(cudaMemset(out.image(), kPoison, out.pitch() * s.height));
      })
      .verify([&](int) {  // one counting pass (none_of would search in 2^20-element pieces, a sync each)
        return thrust::count_if(thrust::device, thrust::counting_iterator<std::size_t>(0),
                                thrust::counting_iterator<std::size_t>(n), mismatch) == 0;
      });
  suite.add("memcpy", [&] {
    CUDA_CHECK(cudaMemcpyAsync(d_dst.data(), d_src.data(), n * sizeof(float), cudaMemcpyDeviceToDevice));
  });
  suite.add("memcpy2d", [&] {
    CUDA_CHECK(cudaMemcpy2DAsync(out.image(), out.pitch(), in.image(), in.pitch(), row_bytes, s.height,
                                 cudaMemcpyDeviceToDevice));
  });
  if (simple_ok) {
    suite.add("one_per_thread",
              [&] { map_affine(in.image(), in.pitch(), out.image(), out.pitch(), s.width, s.height, kA, kB); });
  }
  suite.baseline("memcpy").floor_ms(cudalab::bench::copy_floor_ms(bytes));
  suite.run();
  suite.record();
}

}  // namespace
