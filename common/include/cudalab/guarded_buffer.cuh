// GuardedBuffer<T>: a device array with a poisoned guard zone before and after it. A kernel that writes
// even one element out of bounds changes a guard, and guards_intact() fails the test that launched it,
// with or without compute-sanitizer. Reads out of bounds see the poison: garbage that spoils an answer.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "check.cuh"

namespace cudalab {

// Bytes on each side. A multiple of 256 keeps data() as aligned as cudaMalloc's own pointers, so float4
// and cp.async paths behave as they do on an unguarded buffer.
constexpr std::size_t kGuardBytes = 4096;

// The poison: bytes from a fixed xorshift sequence, so no plausible value a kernel writes (0, -1, a
// float, an index) matches it by chance, and an out-of-bounds read sees junk rather than zeros.
inline std::vector<unsigned char> guard_pattern(std::size_t bytes, std::uint32_t seed) {
  std::vector<unsigned char> out(bytes);
  std::uint32_t x = seed | 1u;
  for (auto& b : out) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<unsigned char>(x >> 24);
  }
  return out;
}

template <class T>
class GuardedBuffer {
 public:
  using value_type = T;

  explicit GuardedBuffer(std::size_t count, std::size_t guard_bytes = kGuardBytes)
      : count_(count), guard_(guard_bytes), front_(guard_pattern(guard_bytes, 0x9e3779b9u)),
        back_(guard_pattern(guard_bytes, 0x85ebca6bu)) {
    if (guard_ % 256 != 0) throw std::invalid_argument("GuardedBuffer: guard_bytes must be a multiple of 256");
    CUDA_CHECK(cudaMalloc(&base_, guard_ + bytes() + guard_));
    reset_guards();
  }
  explicit GuardedBuffer(const std::vector<T>& host) : GuardedBuffer(host.size()) { upload(host); }

  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  ~GuardedBuffer() {
    if (base_ != nullptr) cudaFree(base_);  // never throws from a destructor
  }

  T* data() noexcept { return reinterpret_cast<T*>(base_ + guard_); }
  const T* data() const noexcept { return reinterpret_cast<const T*>(base_ + guard_); }
  std::size_t size() const noexcept { return count_; }
  std::size_t bytes() const noexcept { return count_ * sizeof(T); }

  void upload(const std::vector<T>& host) {
    if (host.size() != count_) throw std::invalid_argument("GuardedBuffer::upload: size mismatch");
    if (count_ > 0) CUDA_CHECK(cudaMemcpy(data(), host.data(), bytes(), cudaMemcpyHostToDevice));
  }
  std::vector<T> to_host() const {
    std::vector<T> host(count_);
    if (count_ > 0) CUDA_CHECK(cudaMemcpy(host.data(), data(), bytes(), cudaMemcpyDeviceToHost));
    return host;
  }
  // Sets every byte of the array, not the guards (cudaMemset semantics).
  void fill_bytes(unsigned char value) {
    if (count_ > 0) CUDA_CHECK(cudaMemset(data(), value, bytes()));
  }

  // Writes the poison again (after a test provoked an out-of-bounds write on purpose, say).
  void reset_guards() {
    CUDA_CHECK(cudaMemcpy(base_, front_.data(), guard_, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(base_ + guard_ + bytes(), back_.data(), guard_, cudaMemcpyHostToDevice));
  }

  // Both guards hold their poison. Synchronizes the device first, so a kernel still running counts.
  // what names the array in the failure ("the output", "c").
  ::testing::AssertionResult guards_intact(const char* what = "the output") const {
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<unsigned char> front(guard_), back(guard_);
    CUDA_CHECK(cudaMemcpy(front.data(), base_, guard_, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaMemcpy(back.data(), base_ + guard_ + bytes(), guard_, cudaMemcpyDeviceToHost));
    std::size_t before = 0, after = 0, nearest_before = 0, nearest_after = guard_;
    for (std::size_t i = 0; i < guard_; ++i) {
      if (front[i] != front_[i]) {
        ++before;
        nearest_before = guard_ - i;  // bytes before the start; the last hit is the nearest
      }
      if (back[i] != back_[i]) {
        ++after;
        if (nearest_after == guard_) nearest_after = i;
      }
    }
    if (before == 0 && after == 0) return ::testing::AssertionSuccess();
    std::ostringstream msg;
    msg << "out-of-bounds write: a kernel changed memory outside " << what << " (" << count_ << " element(s) of "
        << sizeof(T) << " bytes):";
    if (before) msg << " " << before << " byte(s) before its start (the nearest " << nearest_before << " byte(s) before)";
    if (before && after) msg << " and";
    if (after) msg << " " << after << " byte(s) past its end (the first at byte " << nearest_after << " past the end)";
    msg << ". Check the bounds guard of every thread that writes it.";
    return ::testing::AssertionFailure() << msg.str();
  }

 private:
  unsigned char* base_ = nullptr;
  std::size_t count_ = 0;
  std::size_t guard_ = 0;
  std::vector<unsigned char> front_, back_;
};

}  // namespace cudalab
