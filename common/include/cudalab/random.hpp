// Seeded test data. Inputs are random (never zeros, which hide unwritten outputs) and reproducible:
// the same seed gives the same data on every machine, so a failure message's seed reproduces it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

// Rng and draw() also run in device code (device_random.cuh), so the GPU makes the same stream.
#if defined(__CUDACC__)
#define CUDALAB_HOST_DEVICE __host__ __device__
#else
#define CUDALAB_HOST_DEVICE
#endif

namespace cudalab {

// splitmix64: tiny, fast and fully specified, unlike std::uniform_*_distribution whose output
// may differ between standard libraries.
class Rng {
 public:
  static constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ull;

  CUDALAB_HOST_DEVICE explicit Rng(std::uint64_t seed) : state_(seed) {}
  // The generator that Rng(seed) becomes after k draws: the state only ever advances by kGolden,
  // so the stream can be split into chunks that are generated in parallel.
  CUDALAB_HOST_DEVICE static Rng at(std::uint64_t seed, std::uint64_t k) { return Rng(seed + k * kGolden); }

  CUDALAB_HOST_DEVICE std::uint64_t next() {
    std::uint64_t z = (state_ += kGolden);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  CUDALAB_HOST_DEVICE double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  CUDALAB_HOST_DEVICE double uniform(double lo, double hi) {
#if defined(__CUDA_ARCH__)
    return __dadd_rn(lo, __dmul_rn(hi - lo, uniform()));  // no fused multiply-add: the host's value
#else
    return lo + (hi - lo) * uniform();
#endif
  }
  // Uniform integer in [lo, hi], inclusive.
  CUDALAB_HOST_DEVICE std::int64_t integer(std::int64_t lo, std::int64_t hi) {
    const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
    return lo + static_cast<std::int64_t>(span == 0 ? next() : next() % span);
  }

 private:
  std::uint64_t state_;
};

// One value uniform in [lo, hi] (integers inclusive; floating point in [lo, hi)) from rng.
template <class T>
CUDALAB_HOST_DEVICE T draw(Rng& rng, T lo, T hi) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(rng.uniform(static_cast<double>(lo), static_cast<double>(hi)));
  } else {
    return static_cast<T>(rng.integer(static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi)));
  }
}

// n values uniform in [lo, hi]. Element i is Rng(seed)'s (i+1)-th draw. Large vectors are filled by
// several threads, each from its own point of the same stream, so the values do not depend on the
// thread count.
template <class T>
std::vector<T> random_vector(std::size_t n, std::uint64_t seed, T lo, T hi) {
  std::vector<T> v(n);
  auto fill = [&](std::size_t begin, std::size_t end) {
    Rng rng = Rng::at(seed, begin);
    for (std::size_t i = begin; i < end; ++i) v[i] = draw(rng, lo, hi);
  };
  constexpr std::size_t kChunk = std::size_t{1} << 20;  // below this, threads cost more than they save
  const std::size_t threads =
      std::min<std::size_t>({n / kChunk, std::max(1u, std::thread::hardware_concurrency()), 16});
  if (threads <= 1) {
    fill(0, n);
    return v;
  }
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) pool.emplace_back(fill, n * t / threads, n * (t + 1) / threads);
  for (auto& th : pool) th.join();
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
