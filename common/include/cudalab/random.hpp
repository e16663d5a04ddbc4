// Seeded test data. Inputs are random (never zeros, which hide unwritten outputs) and reproducible:
// the same seed gives the same data on every machine, so a failure message's seed reproduces it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace cudalab {

// splitmix64: tiny, fast and fully specified, unlike std::uniform_*_distribution whose output
// may differ between standard libraries.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [lo, hi], inclusive.
  std::int64_t integer(std::int64_t lo, std::int64_t hi) {
    const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
    return lo + static_cast<std::int64_t>(span == 0 ? next() : next() % span);
  }

 private:
  std::uint64_t state_;
};

// n values uniform in [lo, hi] (integers inclusive; floating point in [lo, hi)).
template <class T>
std::vector<T> random_vector(std::size_t n, std::uint64_t seed, T lo, T hi) {
  Rng rng(seed);
  std::vector<T> v(n);
  for (auto& x : v) {
    if constexpr (std::is_floating_point_v<T>) {
      x = static_cast<T>(rng.uniform(static_cast<double>(lo), static_cast<double>(hi)));
    } else {
      x = static_cast<T>(rng.integer(static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi)));
    }
  }
  return v;
}

// The byte a poisoned buffer is filled with. 0xFF makes every float and double a NaN, which fails
// any comparison; 0xA5 makes integers large and odd-looking (0xA5A5A5A5), far from typical results.
template <class T>
constexpr unsigned char poison_byte() {
  return std::is_floating_point_v<T> ? 0xFF : 0xA5;
}

template <class T>
T poison_value() {
  T value;
  unsigned char* bytes = reinterpret_cast<unsigned char*>(&value);
  for (std::size_t i = 0; i < sizeof(T); ++i) bytes[i] = poison_byte<T>();
  return value;
}

// Fill an output buffer (anything with value_type and fill_bytes, such as DeviceBuffer) with poison
// before the code under test runs, so elements it never writes cannot match by luck.
template <class Buffer>
void poison(Buffer& buffer) {
  buffer.fill_bytes(poison_byte<typename Buffer::value_type>());
}

}  // namespace cudalab
