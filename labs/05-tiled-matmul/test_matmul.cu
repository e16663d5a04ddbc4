// Lab 05 tests. Correctness tests judge; perf tests only measure (the grader scores speed).
#include <cublas_v2.h>
#include <gtest/gtest.h>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/logical.h>
#include <thrust/transform.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <ostream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <vector>

#include <cudalab/bench.cuh>
#include <cudalab/check.cuh>
#include <cudalab/compare.hpp>
#include <cudalab/device_buffer.cuh>
#include <cudalab/device_random.cuh>
#include <cudalab/gtest_cuda.hpp>
#include <cudalab/guarded_buffer.cuh>
#include <cudalab/launch.cuh>
#include <cudalab/random.hpp>
#include <cudalab/scribble.cuh>

#include "matmul.cuh"

namespace {

using cudalab::AllEqual;
using cudalab::AllNear;
using cudalab::DeviceBuffer;
using cudalab::GuardedBuffer;
using cudalab::Shape2D;

constexpr std::uint64_t kSeed = 5005;

// ---------------------------------------------------------------------------------------------
// Helpers of every correctness test.
// ---------------------------------------------------------------------------------------------

// Junk in the shared memory of every SM before each call: a kernel that reads a tile slot it never
// stored (no zero-fill at the edges, threads that returned before loading their share) then reads
// 0x5A5A5A5A (1.5e16 as a float), not the zeros of a fresh GPU or what an earlier block left there.
// Left out in small mode, where compute-sanitizer watches every access itself (and would take seconds
// over these 60 MB of stores).
void scribble_shared_memory() { cudalab::scribble_shared_memory({0x5A5A5A5Au}); }

// The contract takes any device pointer to a dense matrix, not only one at the start of an allocation:
// some tests pass pointers `offset` floats in (4-byte aligned, not 16), with `lead` in front.
std::vector<float> placed(const std::vector<float>& values, std::size_t offset, float lead) {
  std::vector<float> out(offset, lead);
  out.insert(out.end(), values.begin(), values.end());
  return out;
}

// The floats of `out` from `offset` on; fails the test if one of the `offset` floats in front changed
// (they hold poison, 0xFF bytes: a write just before the output's start).
std::vector<float> after_offset(const std::vector<float>& out, std::size_t offset, const char* what) {
  const float poisoned = cudalab::poison_value<float>();
  for (std::size_t i = 0; i < offset; ++i) {
    EXPECT_EQ(std::memcmp(&out[i], &poisoned, sizeof(float)), 0)
        << "out-of-bounds write: " << what << " was passed " << offset - i << " float(s) after this one, "
        << "which changed to " << out[i];
  }
  return std::vector<float>(out.begin() + static_cast<std::ptrdiff_t>(offset), out.end());
}

// ---------------------------------------------------------------------------------------------
// cuBLAS, the library baseline. It lives here, never in the student's file.
// ---------------------------------------------------------------------------------------------

void cublas_check(cublasStatus_t status, const char* expr) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("cuBLAS error ") + cublasGetStatusName(status) + " from `" + expr + "`");
  }
}
#define CUBLAS_CHECK(expr) cublas_check((expr), #expr)

// A cuBLAS handle in pure FP32 (CUBLAS_PEDANTIC_MATH): TF32 tensor cores are 8x faster but round the
// inputs to 10 mantissa bits, so they must never count as an FP32 result.
class Cublas {
 public:
  Cublas() {
    CUBLAS_CHECK(cublasCreate(&handle_));
    CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH));
  }
  ~Cublas() { cublasDestroy(handle_); }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;

  // Row-major C (m x n) = A (m x k) B (k x n). cuBLAS is column-major, where our row-major C reads as
  // C^T (n x m) = B^T A^T: so B goes first, and every leading dimension is a row length.
  void sgemm_row_major(const float* d_a, const float* d_b, float* d_c, int m, int n, int k) {
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, d_b, n, d_a, k, &zero, d_c, n));
  }

 private:
  cublasHandle_t handle_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Part A: transpose. Results must be exact: a transpose only moves values.
// ---------------------------------------------------------------------------------------------

struct MatrixShape {
  int rows, cols;
  int offset = 0;  // in and out start this many floats into their allocations
};
void PrintTo(const MatrixShape& s, std::ostream* os) {
  *os << s.rows << " x " << s.cols << (s.offset ? ", pointers 1 float into their allocations" : "");
}

std::vector<float> transpose_reference(const std::vector<float>& in, int rows, int cols) {
  std::vector<float> out(in.size());
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) out[static_cast<std::size_t>(c) * rows + r] = in[static_cast<std::size_t>(r) * cols + c];
  }
  return out;
}

using TransposeFn = void (*)(const float*, float*, int, int);

// Distinct random values in [1, 1000): any element moved to the wrong place, or not written, shows.
// The output lies between guard zones (a write past either end fails the test); the input is a plain
// allocation that ends where the matrix ends, so compute-sanitizer's memcheck sees a read past it.
void check_transpose(TransposeFn transpose, MatrixShape s, std::uint64_t seed) {
  const std::size_t count = static_cast<std::size_t>(s.rows) * s.cols;
  const auto off = static_cast<std::size_t>(s.offset);
  const auto in = cudalab::random_vector<float>(count, seed, 1.0f, 1000.0f);
  DeviceBuffer<float> d_in(placed(in, off, -1.0f));
  GuardedBuffer<float> d_out(off + count);
  cudalab::poison(d_out);
  scribble_shared_memory();
  transpose(d_in.data() + off, d_out.data() + off, s.rows, s.cols);
  EXPECT_TRUE(d_out.guards_intact("the output"));  // synchronizes
  EXPECT_TRUE(AllEqual(transpose_reference(in, s.rows, s.cols), after_offset(d_out.to_host(), off, "the output"), seed,
                       Shape2D{static_cast<std::size_t>(s.cols), static_cast<std::size_t>(s.rows)}))
      << "input " << s.rows << " x " << s.cols << ", output " << s.cols << " x " << s.rows;
}

// Single rows and columns, tile edges +- 1 (32 and 64), non-square shapes, a grid of one row or one
// column of many blocks, many blocks, and pointers that are not at the start of an allocation.
const std::vector<MatrixShape> kTransposeShapes = {
    {1, 1},      {1, 100},   {100, 1},   {31, 33},     {32, 32},      {33, 65},     {63, 65},
    {64, 64},    {96, 160},  {129, 2},   {3, 2049},    {1000, 777},   {4097, 1025}, {33, 65, 1},
    {1000, 777, 1}};

std::string shape_name(const ::testing::TestParamInfo<MatrixShape>& info) {
  return "r" + std::to_string(info.param.rows) + "_c" + std::to_string(info.param.cols) +
         (info.param.offset ? "_off" + std::to_string(info.param.offset) : "");
}

class TransposeCorrectness : public cudalab::GpuTestWithParam<MatrixShape> {};

// --- Task 1 ---
TEST_P(TransposeCorrectness, Naive) {
  const MatrixShape s = GetParam();
  CUDALAB_SKIP_IF_LARGE(static_cast<std::size_t>(s.rows) * s.cols);
  check_transpose(transpose_naive, s, kSeed + s.rows * 7919 + s.cols);
}

// --- Task 2 ---
TEST_P(TransposeCorrectness, Tiled) {
  const MatrixShape s = GetParam();
  CUDALAB_SKIP_IF_LARGE(static_cast<std::size_t>(s.rows) * s.cols);
  check_transpose(transpose_tiled, s, kSeed + s.rows * 7919 + s.cols + 1);
}

// --- Task 3 ---
TEST_P(TransposeCorrectness, Padded) {
  const MatrixShape s = GetParam();
  CUDALAB_SKIP_IF_LARGE(static_cast<std::size_t>(s.rows) * s.cols);
  check_transpose(transpose_padded, s, kSeed + s.rows * 7919 + s.cols + 2);
}
INSTANTIATE_TEST_SUITE_P(, TransposeCorrectness, ::testing::ValuesIn(kTransposeShapes), shape_name);

// ---------------------------------------------------------------------------------------------
// Part B: matmul against a float64 CPU reference.
// ---------------------------------------------------------------------------------------------

struct Dims {
  int m, n, k;
  int offset = 0;  // A, B and C start this many floats into their allocations
};
void PrintTo(const Dims& d, std::ostream* os) {
  *os << "m = " << d.m << ", n = " << d.n << ", k = " << d.k
      << (d.offset ? ", pointers 1 float into their allocations" : "");
}

std::string dims_name(const ::testing::TestParamInfo<Dims>& info) {
  return "m" + std::to_string(info.param.m) + "_n" + std::to_string(info.param.n) + "_k" + std::to_string(info.param.k) +
         (info.param.offset ? "_off" + std::to_string(info.param.offset) : "");
}

// The largest of the three matrices: the sanitizer stage (small mode) keeps problems up to 65536.
std::size_t largest_matrix(Dims d) {
  const auto m = static_cast<std::size_t>(d.m), n = static_cast<std::size_t>(d.n), k = static_cast<std::size_t>(d.k);
  return std::max({m * n, m * k, k * n});
}

struct Problem {
  std::vector<float> a, b;       // inputs
  std::vector<double> expected;  // A * B in float64
  std::uint64_t seed = 0;
};

// i-k-j order: the inner loop runs along rows of B and C, so it vectorizes. About 1 s per 10^9
// multiply-adds on one core, hence the cache below (each problem is solved once per process) and the
// rows shared out over up to kReferenceThreads cores: each thread owns whole rows of C, so every
// element is summed in the same order as on one thread.
constexpr unsigned kReferenceThreads = 16;
constexpr double kThreadedMacs = 1e7;  // below this, starting threads costs more than it saves

std::vector<double> matmul_reference(const std::vector<float>& a, const std::vector<float>& b, Dims d) {
  const std::size_t n = d.n;
  std::vector<double> c(static_cast<std::size_t>(d.m) * n, 0.0);
  const std::vector<double> b64(b.begin(), b.end());
  auto rows = [&](int first, int last) {
    for (int i = first; i < last; ++i) {
      double* c_row = &c[i * n];
      for (int kk = 0; kk < d.k; ++kk) {
        const double a_ik = a[static_cast<std::size_t>(i) * d.k + kk];
        const double* b_row = &b64[kk * n];
        for (std::size_t j = 0; j < n; ++j) c_row[j] += a_ik * b_row[j];
      }
    }
  };
  const double macs = static_cast<double>(d.m) * d.n * d.k;
  const unsigned workers = macs < kThreadedMacs ? 1u : std::clamp(std::thread::hardware_concurrency(), 1u, kReferenceThreads);
  const int chunk = static_cast<int>((static_cast<unsigned>(d.m) + workers - 1) / workers);
  std::vector<std::thread> pool;
  int taken = 0;  // rows [0, taken) belong to a started thread
  while (workers > 1 && taken < d.m) {
    try {
      pool.emplace_back(rows, taken, std::min(d.m, taken + chunk));
    } catch (const std::system_error&) {
      break;  // no more threads (a process limit): this thread computes the rest
    }
    taken = std::min(d.m, taken + chunk);
  }
  rows(taken, d.m);
  for (std::thread& t : pool) t.join();
  return c;
}

// Float problems: entries uniform in [0.25, 1.25), so every element of C is a sum of k positive terms,
// far from 0, and one wrong or missing product moves it by far more than the tolerance.
// Integer problems: entries in {-4..-1, 1..4}. Every product and every partial sum is a small integer,
// exact in float, so the GPU must match the reference bit for bit whatever its summation order: a
// single product taken from the wrong tile (a race) is an error of at least 1.
const Problem& problem(Dims d, bool integers) {
  static std::map<std::tuple<int, int, int, bool>, Problem> cache;
  const auto key = std::make_tuple(d.m, d.n, d.k, integers);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Problem p;
  p.seed = kSeed + 1000003ull * d.m + 1009ull * d.n + d.k + (integers ? 17 : 0);
  const std::size_t a_count = static_cast<std::size_t>(d.m) * d.k, b_count = static_cast<std::size_t>(d.k) * d.n;
  if (integers) {
    auto to_float = [](const std::vector<int>& v) {
      std::vector<float> f(v.size());
      for (std::size_t i = 0; i < v.size(); ++i) f[i] = static_cast<float>(v[i] >= 0 ? v[i] + 1 : v[i]);
      return f;
    };
    p.a = to_float(cudalab::random_vector<int>(a_count, p.seed, -4, 3));
    p.b = to_float(cudalab::random_vector<int>(b_count, p.seed + 1, -4, 3));
  } else {
    p.a = cudalab::random_vector<float>(a_count, p.seed, 0.25f, 1.25f);
    p.b = cudalab::random_vector<float>(b_count, p.seed + 1, 0.25f, 1.25f);
  }
  p.expected = matmul_reference(p.a, p.b, d);
  return cache.emplace(key, std::move(p)).first->second;
}

using MatmulFn = void (*)(const float*, const float*, float*, int, int, int);

// A, B and C lie between guard zones: a value read past the end of A or B is junk that spoils C, and a
// write past either end of C fails the test. With an offset, a huge value sits in front of A and B.
std::vector<float> run_matmul(MatmulFn matmul, const Problem& p, Dims d) {
  const auto off = static_cast<std::size_t>(d.offset);
  GuardedBuffer<float> d_a(placed(p.a, off, 1e30f)), d_b(placed(p.b, off, 1e30f));
  GuardedBuffer<float> d_c(off + static_cast<std::size_t>(d.m) * d.n);
  cudalab::poison(d_c);
  scribble_shared_memory();
  matmul(d_a.data() + off, d_b.data() + off, d_c.data() + off, d.m, d.n, d.k);
  EXPECT_TRUE(d_c.guards_intact("C"));  // synchronizes
  return after_offset(d_c.to_host(), off, "C");
}

// float32 sums of k positive terms stay within ~1e-6 of the float64 result here; one product out of
// place moves an element by ~1e-3 (k = 1000) relative.
constexpr cudalab::Tolerance kMatmulTol{3e-5, 0.0};

void check_matmul(MatmulFn matmul, Dims d) {
  const Problem& p = problem(d, false);
  EXPECT_TRUE(AllNear(p.expected, run_matmul(matmul, p, d), kMatmulTol, p.seed,
                      Shape2D{static_cast<std::size_t>(d.m), static_cast<std::size_t>(d.n)}))
      << "C is " << d.m << " x " << d.n << " with k = " << d.k << " (A is m x k, B is k x n, all row-major)";
}

void check_matmul_exact(MatmulFn matmul, Dims d) {
  const Problem& p = problem(d, true);
  EXPECT_TRUE(AllEqual(p.expected, run_matmul(matmul, p, d), p.seed,
                       Shape2D{static_cast<std::size_t>(d.m), static_cast<std::size_t>(d.n)}))
      << "integer inputs, so the result must be exact; a few scattered wrong elements that change from "
         "run to run point to a race: is the tile overwritten while other warps still read it?";
}

// 1 x 1 x 1; tile edges +- 1; m != n != k everywhere (swapped row and column indexing fails);
// shapes that leave partial tiles in every dimension (k % 4 != 0 and k % 4 == 0); one row or one
// column of C; k shorter than one k-slice of a pipelined kernel (7, 12, 16) and just over it (17), with
// n % 4 != 0 and n % 4 == 0 (both copy paths of the challenge); pointers 1 float into their allocations
// (4-byte aligned, not 16: no float4 access may assume more), with n % 4 == 0 and != 0; 1000^3, 1024^3.
const std::vector<Dims> kMatmulDims = {{1, 1, 1},           {17, 33, 65},     {33, 31, 32},      {100, 75, 300},
                                       {129, 127, 257},     {200, 192, 260},  {300, 200, 513},   {1, 300, 70},
                                       {257, 1, 33},        {257, 129, 7},    {64, 1000, 16},    {130, 260, 17},
                                       {100, 75, 300, 1},   {129, 128, 40, 1}, {1000, 1000, 1000}, {1024, 1024, 1024}};

class MatmulCorrectness : public cudalab::GpuTestWithParam<Dims> {};

// --- Task 4 ---
TEST_P(MatmulCorrectness, Naive) {
  CUDALAB_SKIP_IF_LARGE(largest_matrix(GetParam()));
  check_matmul(matmul_naive, GetParam());
}

// --- Task 5 ---
TEST_P(MatmulCorrectness, Tiled) {
  CUDALAB_SKIP_IF_LARGE(largest_matrix(GetParam()));
  check_matmul(matmul_tiled, GetParam());
}

// --- Challenge ---
TEST_P(MatmulCorrectness, Fast) {
  CUDALAB_SKIP_IF_LARGE(largest_matrix(GetParam()));
  check_matmul(matmul_fast, GetParam());
}
INSTANTIATE_TEST_SUITE_P(, MatmulCorrectness, ::testing::ValuesIn(kMatmulDims), dims_name);

// Exact tests that a missing barrier fails. With k = 4096 a block walks 128 tiles of 32: warps that run
// ahead keep overwriting tiles that slower warps are still reading, in hundreds of blocks at once.
// The second shape leaves partial tiles everywhere, so missing zero-fill shows exactly too. The third
// has k shorter than one k-slice of a pipelined kernel: its one slice must have landed before use.
const std::vector<Dims> kExactDims = {{640, 512, 4096}, {333, 517, 1999}, {300, 260, 12}};

class MatmulExactCorrectness : public cudalab::GpuTestWithParam<Dims> {};

TEST_P(MatmulExactCorrectness, Tiled) {
  CUDALAB_SKIP_IF_LARGE(largest_matrix(GetParam()));
  check_matmul_exact(matmul_tiled, GetParam());
}

TEST_P(MatmulExactCorrectness, Fast) {
  CUDALAB_SKIP_IF_LARGE(largest_matrix(GetParam()));
  check_matmul_exact(matmul_fast, GetParam());
}
INSTANTIATE_TEST_SUITE_P(, MatmulExactCorrectness, ::testing::ValuesIn(kExactDims), dims_name);

// ---------------------------------------------------------------------------------------------
// Perf inputs that change before every call of the function under test (bench.cuh, prepare and
// verify): the signs of a random half of an input's rows flip in place. The work stays the same, the
// right output changes with them exactly, and it is checked on the GPU.
// ---------------------------------------------------------------------------------------------

// d[i] *= flip[row of i] in a row-major matrix with rows of `cols`: a product by -1 or 1 is exact.
struct ScaleRows {
  float* d;
  const float* flip;
  std::size_t cols;
  __device__ void operator()(std::size_t i) const { d[i] *= flip[i / cols]; }
};

// True where actual[i] is not expected[i] times the sign of its line (the row of i, or by_column its
// column, in rows of line_length) within tol, as AllNear judges it: NaN never passes.
struct SignedMismatch {
  const float* actual;
  const float* expected;
  const float* sign;
  std::size_t line_length;
  bool by_column;
  cudalab::Tolerance tol;
  __device__ bool operator()(std::size_t i) const {
    const std::size_t line = by_column ? i % line_length : i / line_length;
    const double e = sign[line] * expected[i];
    return !(fabs(actual[i] - e) <= tol.abs + tol.rel * fabs(e));
  }
};

// The signs of a matrix's rows, each flipped with probability 1/2 before every call: one of 2^rows
// sign patterns, so an input never comes back (nor does the answer a cache would key on it).
class RowSigns {
 public:
  RowSigns(std::size_t rows, std::uint64_t seed)
      : seed_(seed), flip_(rows), sign_(rows, 1.0f), d_flip_(rows), d_sign_(sign_) {}

  // Flips call `call`'s random rows of d_matrix (rows x cols) in place. Call c draws from its own
  // stretch of Rng(seed)'s stream (2^32 draws long), so the flips depend only on the seed and c.
  void flip(float* d_matrix, std::size_t cols, int call) {
    cudalab::Rng rng = cudalab::Rng::at(seed_, static_cast<std::uint64_t>(call) << 32);
    for (std::size_t r = 0; r < sign_.size(); ++r) {
      flip_[r] = (rng.next() >> 63) != 0 ? -1.0f : 1.0f;
      sign_[r] *= flip_[r];
    }
    d_flip_.upload(flip_);
    d_sign_.upload(sign_);
    thrust::for_each_n(thrust::device, thrust::counting_iterator<std::size_t>(0), sign_.size() * cols,
                       ScaleRows{d_matrix, d_flip_.data(), cols});
  }

  // Whether d_actual[0, count) is d_expected, the output for the unflipped input, with the flipped
  // rows' signs on its rows (by_column: on its columns, as a transpose moves them), within tol.
  bool matches(const float* d_actual, const float* d_expected, std::size_t count, std::size_t line_length,
               bool by_column, cudalab::Tolerance tol) const {
    return thrust::none_of(thrust::device, thrust::counting_iterator<std::size_t>(0),
                           thrust::counting_iterator<std::size_t>(count),
                           SignedMismatch{d_actual, d_expected, d_sign_.data(), line_length, by_column, tol});
  }

 private:
  std::uint64_t seed_;
  std::vector<float> flip_, sign_;  // this call's flips (-1 or 1); every row's sign so far
  DeviceBuffer<float> d_flip_, d_sign_;
};

// ---------------------------------------------------------------------------------------------
// Perf: TFLOP/s = 2 n^3 / t against cuBLAS SGEMM in pure FP32, on the same buffers.
// ---------------------------------------------------------------------------------------------

// A function's output against cuBLAS's: both sum 4096+ positive terms in float32 in different orders,
// so they agree to ~1e-6.
constexpr cudalab::Tolerance kGemmBenchTol{1e-4, 0.0};

// Square problems too big for a CPU reference: a function's output is checked against cuBLAS instead.
// Everything stays on the GPU (inputs made there, outputs compared there): at 8192^2 the host would
// spend seconds making, copying and comparing 256 MB matrices before the first timed call.
struct GemmBench {
  explicit GemmBench(int size)
      : n(size),
        count(static_cast<std::size_t>(size) * size),
        d_a(count),
        d_b(count),
        d_c(count),
        d_ref(count),
        a_signs(static_cast<std::size_t>(size), kSeed + size + 2) {
    cudalab::random_fill(d_a.data(), count, kSeed + size, 0.25f, 1.25f);
    cudalab::random_fill(d_b.data(), count, kSeed + size + 1, 0.25f, 1.25f);
    blas.sgemm_row_major(d_a.data(), d_b.data(), d_ref.data(), n, n, n);
    CUDA_CHECK(cudaDeviceSynchronize());
  }

  // Runs fn once on a poisoned output and compares with cuBLAS. Only before the timing: A is as made
  // (no row flipped yet, so every sign is +1).
  bool correct(MatmulFn fn) {
    cudalab::poison(d_c);
    fn(d_a.data(), d_b.data(), d_c.data(), n, n, n);
    CUDA_CHECK(cudaDeviceSynchronize());
    return a_signs.matches(d_c.data(), d_ref.data(), count, n, false, kGemmBenchTol);
  }

  void add(cudalab::bench::Suite& suite, const std::string& name, MatmulFn fn) {
    suite.add(name, [this, fn] { fn(d_a.data(), d_b.data(), d_c.data(), n, n, n); });
  }
  // The function under test, timed as add() does. Before every call a random half of A's rows flip
  // sign, and the same rows of C with them, exactly (IEEE rounding is symmetric), and C is poisoned;
  // after it, all of C is checked against cuBLAS's first result with those rows negated.
  void add_impl(cudalab::bench::Suite& suite, MatmulFn fn) {
    add(suite, "impl", fn);
    suite
        .prepare([this](int call) {
          a_signs.flip(d_a.data(), n, call);
          cudalab::poison(d_c);
          CUDA_CHECK(cudaDeviceSynchronize());  // in place before the call, whatever streams it uses
        })
        .verify([this](int) { return a_signs.matches(d_c.data(), d_ref.data(), count, n, false, kGemmBenchTol); });
  }
  void add_cublas(cudalab::bench::Suite& suite) {
    suite.add("cublas", [this] { blas.sgemm_row_major(d_a.data(), d_b.data(), d_c.data(), n, n, n); });
    suite.baseline("cublas");
  }
  double flops() const { return 2.0 * n * n * static_cast<double>(n); }
  std::string label() const { return std::to_string(n) + "^3, FP32"; }

  int n;
  std::size_t count;
  Cublas blas;
  DeviceBuffer<float> d_a, d_b, d_c, d_ref;  // d_ref: cuBLAS's C for A as made
  RowSigns a_signs;
};

class MatmulPerf : public cudalab::GpuTestWithParam<int> {};

// The naive kernel takes ~25 ms per call at 4096^3: fewer seconds for this suite.
TEST_P(MatmulPerf, Naive) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  GemmBench g(GetParam());
  if (!g.correct(matmul_naive)) CUDALAB_SKIP("matmul_naive is incorrect at this size: not timed");
  cudalab::bench::Options options;
  options.max_seconds = 2.0;
  cudalab::bench::Suite suite(cudalab::bench::Work::flops(g.flops()), g.label(), options);
  g.add_impl(suite, matmul_naive);
  g.add_cublas(suite);
  suite.run();
  suite.record();
}

TEST_P(MatmulPerf, Tiled) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  GemmBench g(GetParam());
  if (!g.correct(matmul_tiled)) CUDALAB_SKIP("matmul_tiled is incorrect at this size: not timed");
  cudalab::bench::Suite suite(cudalab::bench::Work::flops(g.flops()), g.label());
  g.add_impl(suite, matmul_tiled);
  g.add_cublas(suite);
  suite.run();
  suite.record();
}

TEST_P(MatmulPerf, Fast) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  GemmBench g(GetParam());
  if (!g.correct(matmul_fast)) CUDALAB_SKIP("matmul_fast is incorrect at this size: not timed");
  const bool tiled_ok = g.correct(matmul_tiled);
  cudalab::bench::Suite suite(cudalab::bench::Work::flops(g.flops()), g.label());
  g.add_impl(suite, matmul_fast);
  g.add_cublas(suite);
  if (tiled_ok) g.add(suite, "tiled", matmul_tiled);
  suite.run();
  suite.record();
}
INSTANTIATE_TEST_SUITE_P(, MatmulPerf, ::testing::Values(4096), cudalab::SizeName());

// 8192^3 (1.1 TFLOP per call), for the record: the challenge against cuBLAS on a bigger problem.
class MatmulLargePerf : public cudalab::GpuTestWithParam<int> {};

TEST_P(MatmulLargePerf, Fast) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  GemmBench g(GetParam());
  if (!g.correct(matmul_fast)) CUDALAB_SKIP("matmul_fast is incorrect at this size: not timed");
  cudalab::bench::Suite suite(cudalab::bench::Work::flops(g.flops()), g.label());
  g.add_impl(suite, matmul_fast);
  g.add_cublas(suite);
  suite.run();
  suite.record();
}
INSTANTIATE_TEST_SUITE_P(, MatmulLargePerf, ::testing::Values(8192), cudalab::SizeName());

// Transpose: GB/s = 2 * 4 * n^2 / t (each element read once and written once), against a
// device-to-device cudaMemcpy of the same bytes, which is what a transpose can at best approach.
class TransposePerf : public cudalab::GpuTestWithParam<int> {};

// Element i of the transpose of a square n x n row-major matrix: row i / n of it is column i / n of in.
struct TransposedAt {
  const float* in;
  std::size_t n;
  __device__ float operator()(std::size_t i) const { return in[(i % n) * n + i / n]; }
};

TEST_P(TransposePerf, Padded) {
  CUDALAB_SKIP_PERF_IN_SMALL_MODE();
  const int n = GetParam();
  const std::size_t count = static_cast<std::size_t>(n) * n;
  // Made, transposed and compared on the GPU: on the host the 8192^2 transpose alone took a second.
  DeviceBuffer<float> d_in(count), d_out(count), d_expected(count);
  cudalab::random_fill(d_in.data(), count, kSeed + 8, 1.0f, 1000.0f);
  thrust::transform(thrust::device, thrust::counting_iterator<std::size_t>(0),
                    thrust::counting_iterator<std::size_t>(count), d_expected.data(),
                    TransposedAt{d_in.data(), static_cast<std::size_t>(n)});
  CUDA_CHECK(cudaDeviceSynchronize());  // the input and its transpose made before any stream reads them
  RowSigns in_signs(n, kSeed + 9);  // every sign +1 until the first flip
  constexpr cudalab::Tolerance kExact{};  // a transpose only moves values
  auto correct = [&](TransposeFn fn) {
    cudalab::poison(d_out);
    fn(d_in.data(), d_out.data(), n, n);
    CUDA_CHECK(cudaDeviceSynchronize());
    return in_signs.matches(d_out.data(), d_expected.data(), count, n, true, kExact);
  };
  if (!correct(transpose_padded)) CUDALAB_SKIP("transpose_padded is incorrect at this size: not timed");
  const bool tiled_ok = correct(transpose_tiled);
  const bool naive_ok = correct(transpose_naive);

  const double bytes = 2.0 * sizeof(float) * count;
  cudalab::bench::Suite suite(cudalab::bench::Work::bytes(bytes), std::to_string(n) + " x " + std::to_string(n) + " float");
  // Before every call a random half of the input's rows flip sign (the same columns of the output) and
  // the output is poisoned; after it, all of the output is compared with the first input's transpose.
  suite.add("impl", [&] { transpose_padded(d_in.data(), d_out.data(), n, n); })
      .prepare([&](int call) {
        in_signs.flip(d_in.data(), n, call);
        cudalab::poison(d_out);
        CUDA_CHECK(cudaDeviceSynchronize());  // in place before the call, whatever streams it uses
      })
      .verify([&](int) { return in_signs.matches(d_out.data(), d_expected.data(), count, n, true, kExact); });
  suite.add("memcpy", [&] {
    CUDA_CHECK(cudaMemcpyAsync(d_out.data(), d_in.data(), count * sizeof(float), cudaMemcpyDeviceToDevice));
  });
  if (tiled_ok) suite.add("tiled", [&] { transpose_tiled(d_in.data(), d_out.data(), n, n); });
  if (naive_ok) suite.add("naive", [&] { transpose_naive(d_in.data(), d_out.data(), n, n); });
  suite.baseline("memcpy").floor_ms(cudalab::bench::copy_floor_ms(bytes));
  suite.run();
  suite.record();
}
INSTANTIATE_TEST_SUITE_P(, TransposePerf, ::testing::Values(8192), cudalab::SizeName());

}  // namespace
