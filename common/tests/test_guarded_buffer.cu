// Self-tests of GuardedBuffer: an out-of-bounds write on either side must fail guards_intact(), and
// in-bounds work (even the last element, even n = 0) must not.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <cudalab/check.cuh>
#include <cudalab/guarded_buffer.cuh>
#include <cudalab/gtest_cuda.hpp>

namespace {

// Writes value to p[i] for every i in [first, last): first and last may lie outside the array on purpose.
__global__ void write_range(float* p, long long first, long long last, float value) {
  const long long i = first + static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < last) p[i] = value;
}

void write(cudalab::GuardedBuffer<float>& buf, long long first, long long last, float value = 1.0f) {
  const long long count = last - first;
  if (count <= 0) return;
  write_range<<<static_cast<unsigned>((count + 255) / 256), 256>>>(buf.data(), first, last, value);
  CUDA_CHECK_LAST();
}

class GuardedBufferTest : public cudalab::GpuTest {};

TEST_F(GuardedBufferTest, InBoundsWritesKeepTheGuards) {
  for (std::size_t n : {std::size_t{1}, std::size_t{257}, std::size_t{1} << 20}) {
    cudalab::GuardedBuffer<float> buf(n);
    write(buf, 0, static_cast<long long>(n));
    EXPECT_TRUE(buf.guards_intact()) << n;
    const auto host = buf.to_host();
    EXPECT_EQ(host.front(), 1.0f);
    EXPECT_EQ(host.back(), 1.0f);
  }
  cudalab::GuardedBuffer<float> empty(0);
  EXPECT_TRUE(empty.guards_intact());
}

TEST_F(GuardedBufferTest, OnePastTheEndIsCaught) {
  cudalab::GuardedBuffer<float> buf(1000);
  write(buf, 0, 1001, 0.0f);  // zero is a value a careless kernel writes: the poison is not zero
  const auto verdict = buf.guards_intact("c");
  EXPECT_FALSE(verdict);
  EXPECT_NE(std::string(verdict.message()).find("past its end (the first at byte 0"), std::string::npos)
      << verdict.message();
  buf.reset_guards();
  EXPECT_TRUE(buf.guards_intact());
}

TEST_F(GuardedBufferTest, OneBeforeTheStartIsCaught) {
  cudalab::GuardedBuffer<float> buf(1000);
  write(buf, -1, 0, -1.0f);  // element -1: the 4 bytes just before the start, the last of them adjacent
  const auto verdict = buf.guards_intact();
  EXPECT_FALSE(verdict);
  EXPECT_NE(std::string(verdict.message()).find("4 byte(s) before its start (the nearest 1 byte(s) before)"),
            std::string::npos)
      << verdict.message();
}

TEST_F(GuardedBufferTest, DataIsAlignedForVectorAccess) {
  cudalab::GuardedBuffer<float> buf(3);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buf.data()) % 256, 0u);
}

}  // namespace
