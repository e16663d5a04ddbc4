// Error checking for CUDA runtime calls. Every call that returns cudaError_t goes through
// CUDA_CHECK; every kernel launch is followed by CUDA_CHECK_LAST(). Errors throw (never exit), so a
// test reports the failing call with its error name, and the grader can tell what went wrong.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace cudalab {

class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const char* expr, const char* file, int line)
      : std::runtime_error(describe(code, expr, file, line)), code_(code) {}

  cudaError_t code() const noexcept { return code_; }

 private:
  static std::string describe(cudaError_t code, const char* expr, const char* file, int line) {
    return std::string("CUDA error ") + cudaGetErrorName(code) + " (" + cudaGetErrorString(code) +
           ") from `" + expr + "` at " + file + ":" + std::to_string(line);
  }

  cudaError_t code_;
};

inline void check(cudaError_t code, const char* expr, const char* file, int line) {
  if (code != cudaSuccess) throw CudaError(code, expr, file, line);
}

// A launch reports configuration errors (too many threads, too much shared memory) right away through
// cudaGetLastError(); faults inside the kernel only appear at the next synchronizing call. With
// CUDALAB_SYNC_CHECKS (the debug preset) we also synchronize, so a fault names the launch that caused it.
inline void check_last(const char* file, int line) {
  check(cudaGetLastError(), "kernel launch", file, line);
#ifdef CUDALAB_SYNC_CHECKS
  check(cudaDeviceSynchronize(), "kernel execution (synchronous check)", file, line);
#endif
}

}  // namespace cudalab

#define CUDA_CHECK(expr) ::cudalab::check((expr), #expr, __FILE__, __LINE__)
#define CUDA_CHECK_LAST() ::cudalab::check_last(__FILE__, __LINE__)
