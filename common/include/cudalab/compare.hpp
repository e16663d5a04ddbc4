// Whole-array comparisons for GoogleTest. One assertion per output array; on failure the message
// names how many elements differ, the first few (index, expected, actual), the tolerance and the
// seed that generated the input, so a student can reproduce and locate the bug.
//
//   EXPECT_TRUE(cudalab::AllEqual(expected, actual, seed));
//   EXPECT_TRUE(cudalab::AllNear(expected_f64, actual, {1e-5, 1e-6}, seed));
//   EXPECT_TRUE(cudalab::AllEqual(expected, actual, seed, cudalab::Shape2D{rows, cols}));
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace cudalab {

struct Tolerance {
  double rel = 0.0;  // relative to |expected|
  double abs = 0.0;  // absolute floor, for expected values near zero
};

// The layout of a row-major 2D output: mismatches are reported as (row, col), and a coarse map of
// where they lie is recorded as the test properties mismatch_shape / mismatch_map for the report.
struct Shape2D {
  std::size_t rows = 0;
  std::size_t cols = 0;
};

namespace detail {

constexpr std::size_t kShownMismatches = 8;
constexpr std::size_t kMapCells = 24;  // the recorded map is at most kMapCells x kMapCells

template <class T>
std::string show(const T& v) {
  std::ostringstream out;
  if constexpr (std::is_floating_point_v<T>) {
    out.precision(9);
    out << v;
  } else if constexpr (sizeof(T) == 1) {
    out << static_cast<int>(v);  // print bytes as numbers, not characters
  } else {
    out << v;
  }
  return out.str();
}

inline std::string where(std::size_t i, const std::optional<Shape2D>& shape) {
  if (!shape || shape->cols == 0) return "[" + std::to_string(i) + "]";
  return "[row " + std::to_string(i / shape->cols) + ", col " + std::to_string(i % shape->cols) + "]";
}

// Records a coarse density map of mismatches: rows separated by '/', one digit per cell,
// 0 = no mismatch in the cell, 1..9 = rising fraction of wrong elements.
inline void record_mismatch_map(const std::vector<std::size_t>& bad, std::size_t total_bad,
                                const Shape2D& shape, bool complete) {
  const std::size_t map_rows = std::min(shape.rows, kMapCells);
  const std::size_t map_cols = std::min(shape.cols, kMapCells);
  std::vector<std::size_t> counts(map_rows * map_cols, 0);
  for (std::size_t i : bad) {
    const std::size_t r = (i / shape.cols) * map_rows / shape.rows;
    const std::size_t c = (i % shape.cols) * map_cols / shape.cols;
    ++counts[r * map_cols + c];
  }
  const double cell_elems =
      static_cast<double>(shape.rows) * shape.cols / static_cast<double>(map_rows * map_cols);
  std::string map;
  for (std::size_t r = 0; r < map_rows; ++r) {
    if (r > 0) map += '/';
    for (std::size_t c = 0; c < map_cols; ++c) {
      const double frac = counts[r * map_cols + c] / cell_elems;
      map += counts[r * map_cols + c] == 0
                 ? '0'
                 : static_cast<char>('0' + std::clamp(static_cast<int>(std::ceil(frac * 9)), 1, 9));
    }
  }
  ::testing::Test::RecordProperty("mismatch_shape",
                                  std::to_string(shape.rows) + "x" + std::to_string(shape.cols));
  ::testing::Test::RecordProperty("mismatch_map", map);
  ::testing::Test::RecordProperty("mismatch_map_complete", complete ? "true" : "false");
  (void)total_bad;
}

template <class E, class A, class Same>
::testing::AssertionResult compare(const std::vector<E>& expected, const std::vector<A>& actual,
                                   Same same, const std::string& rule, std::uint64_t seed,
                                   const std::optional<Shape2D>& shape) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure() << "size differs: expected " << expected.size()
                                         << " elements, got " << actual.size();
  }
  // Keep every mismatching index for the 2D map only; a large wrong output would otherwise
  // allocate a lot, so stop collecting after a bound (the count stays exact).
  constexpr std::size_t kMaxKept = std::size_t{1} << 22;
  std::vector<std::size_t> bad;
  std::size_t bad_count = 0;
  std::size_t first_bad = 0, last_bad = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (same(expected[i], actual[i])) continue;
    if (bad_count == 0) first_bad = i;
    last_bad = i;
    ++bad_count;
    if (bad.size() < kMaxKept) bad.push_back(i);
  }
  if (bad_count == 0) return ::testing::AssertionSuccess();

  auto failure = ::testing::AssertionFailure();
  failure << bad_count << " of " << expected.size() << " elements differ (seed " << seed << ", "
          << rule << "); mismatches span indices " << first_bad << ".." << last_bad << "\n";
  for (std::size_t k = 0; k < std::min(bad.size(), kShownMismatches); ++k) {
    const std::size_t i = bad[k];
    failure << "  " << where(i, shape) << " expected " << show(expected[i]) << ", actual "
            << show(actual[i]) << "\n";
  }
  if (bad_count > kShownMismatches) failure << "  ... and " << bad_count - kShownMismatches << " more";
  if (shape && shape->rows > 0 && shape->cols > 0 && shape->rows * shape->cols == expected.size()) {
    record_mismatch_map(bad, bad_count, *shape, bad.size() == bad_count);
  }
  return failure;
}

}  // namespace detail

// Exact comparison: integers, indices, counts, anything that must match bit for bit.
template <class E, class A>
::testing::AssertionResult AllEqual(const std::vector<E>& expected, const std::vector<A>& actual,
                                    std::uint64_t seed, std::optional<Shape2D> shape = std::nullopt) {
  return detail::compare(
      expected, actual, [](const E& e, const A& a) { return e == static_cast<E>(a); }, "exact", seed,
      shape);
}

// Floating-point comparison against a (usually float64) reference: |actual - expected| must be at
// most abs + rel * |expected|. NaN never passes.
template <class E, class A>
::testing::AssertionResult AllNear(const std::vector<E>& expected, const std::vector<A>& actual,
                                   Tolerance tol, std::uint64_t seed,
                                   std::optional<Shape2D> shape = std::nullopt) {
  std::ostringstream rule;
  rule << "tolerance rel " << tol.rel << " abs " << tol.abs;
  return detail::compare(
      expected, actual,
      [tol](const E& e, const A& a) {
        const double diff = std::fabs(static_cast<double>(a) - static_cast<double>(e));
        return diff <= tol.abs + tol.rel * std::fabs(static_cast<double>(e));  // false for NaN
      },
      rule.str(), seed, shape);
}

// One scalar against its reference, with the same message style.
template <class E, class A>
::testing::AssertionResult Near(E expected, A actual, Tolerance tol, std::uint64_t seed) {
  return AllNear(std::vector<E>{expected}, std::vector<A>{actual}, tol, seed);
}

}  // namespace cudalab
