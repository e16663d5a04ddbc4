// The kernels the GPU ran while a KernelLaunchLog was recording, with their grid and block, as CUPTI's
// activity API reports them: every launch counts, whichever API made it (<<<>>>, cudaLaunchKernelEx, a
// cooperative launch, a graph), so a test can check a launch contract ("runs on exactly the given grid").
// Test-side only: link CUDA::cupti (cudalab_add_lab(... LIBS CUDA::cupti)). A lab file cannot call CUPTI.
#pragma once

#include <cuda_runtime.h>
#include <cupti.h>
#include <cxxabi.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cudalab {

struct KernelLaunch {
  std::string name;  // demangled, e.g. "add_mirrored_grid_stride_kernel(float const*, float*, int, int)"
  dim3 grid, block;
};

namespace detail {

constexpr std::size_t kCuptiBufferBytes = 1 << 20;  // records arrive in buffers of this size
constexpr std::size_t kCuptiBufferAlign = 8;        // CUPTI wants 8-byte aligned buffers

inline std::mutex& launch_mutex() {
  static std::mutex mutex;
  return mutex;
}
inline std::vector<KernelLaunch>& launches_seen() {
  static std::vector<KernelLaunch> seen;
  return seen;
}

inline std::string demangle(const char* name) {
  if (name == nullptr) return "(unnamed kernel)";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> plain(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && plain ? std::string(plain.get()) : std::string(name);
}

inline void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kCuptiBufferAlign, kCuptiBufferBytes));
  *size = *buffer != nullptr ? kCuptiBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

inline void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes) {
  std::lock_guard<std::mutex> lock(launch_mutex());
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    launches_seen().push_back(KernelLaunch{
        demangle(kernel->name),
        dim3(static_cast<unsigned>(kernel->gridX), static_cast<unsigned>(kernel->gridY),
             static_cast<unsigned>(kernel->gridZ)),
        dim3(static_cast<unsigned>(kernel->blockX), static_cast<unsigned>(kernel->blockY),
             static_cast<unsigned>(kernel->blockZ))});
  }
  std::free(buffer);
}

inline std::string cupti_error(const char* call, CUptiResult result) {
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  return std::string(call) + " failed: " + (text != nullptr ? text : "unknown CUPTI error");
}

}  // namespace detail

// Records the kernels run between its construction and launches(). Construct it after the inputs are
// ready (it synchronizes the device first, so nothing launched earlier is counted); one at a time.
class KernelLaunchLog {
 public:
  KernelLaunchLog() {
    cudaDeviceSynchronize();
    static const CUptiResult registered =
        cuptiActivityRegisterCallbacks(detail::buffer_requested, detail::buffer_completed);
    if (registered != CUPTI_SUCCESS) {
      error_ = detail::cupti_error("cuptiActivityRegisterCallbacks", registered);
      return;
    }
    cuptiActivityFlushAll(1);  // drop what an earlier log left behind
    {
      std::lock_guard<std::mutex> lock(detail::launch_mutex());
      detail::launches_seen().clear();
    }
    const CUptiResult enabled = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (enabled != CUPTI_SUCCESS) error_ = detail::cupti_error("cuptiActivityEnable", enabled);
  }
  ~KernelLaunchLog() { stop(); }
  KernelLaunchLog(const KernelLaunchLog&) = delete;
  KernelLaunchLog& operator=(const KernelLaunchLog&) = delete;

  // Empty when CUPTI records launches; otherwise why it cannot (another profiler attached, say).
  const std::string& error() const { return error_; }

  // Waits for the GPU, stops recording and returns the kernels it ran, in the order CUPTI reported them.
  std::vector<KernelLaunch> launches() {
    stop();
    std::lock_guard<std::mutex> lock(detail::launch_mutex());
    return detail::launches_seen();
  }

 private:
  void stop() {
    if (stopped_ || !error_.empty()) return;
    stopped_ = true;
    cudaDeviceSynchronize();
    cuptiActivityFlushAll(1);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityFlushAll(1);
  }

  std::string error_;
  bool stopped_ = false;
};

}  // namespace cudalab
