// DeviceAllEqual: AllEqual (compare.hpp) for arrays that live on the GPU. They are compared there:
// copying 2^28 elements back and comparing them on the host takes seconds. Only arrays that differ
// are copied to the host, where AllEqual writes the message (how many differ, the first, the seed).
#pragma once

#include <gtest/gtest.h>
#include <thrust/equal.h>
#include <thrust/execution_policy.h>

#include <cstdint>

#include "compare.hpp"

namespace cudalab {

// Exact comparison (NaN never matches) of two device arrays: DeviceBuffer or GuardedBuffer, anything
// with data(), size() and to_host(). The caller synchronizes with the work that wrote d_actual.
template <class Expected, class Actual>
::testing::AssertionResult DeviceAllEqual(const Expected& d_expected, const Actual& d_actual, std::uint64_t seed) {
  const std::size_t n = d_expected.size();
  if (n == d_actual.size() &&
      (n == 0 || thrust::equal(thrust::device, d_expected.data(), d_expected.data() + n, d_actual.data()))) {
    return ::testing::AssertionSuccess();
  }
  return AllEqual(d_expected.to_host(), d_actual.to_host(), seed);
}

}  // namespace cudalab
