// The runtime's functions that create and release memory, streams and events, defined in the test
// binary: each calls the runtime's own (the next definition in load order: dlsym(RTLD_NEXT)) and keeps
// the tally of cudalab/resource_tally.hpp.
// The test binary exports them (cmake/test-binary.dynamic), so the lab's code library binds its calls
// here too. Only the tests read the tally; it decides nothing about what the code may call.
#include <cudalab/resource_tally.hpp>

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>

namespace {

enum Kind { kDevice, kPinned, kStream, kEvent, kKinds };

struct Tally {
  std::mutex mutex;
  std::unordered_map<const void*, std::size_t> held[kKinds];  // what is alive, with its bytes
  std::int64_t bytes[kKinds] = {};
  std::int64_t allocation_calls = 0;
};

Tally& tally() {
  static Tally* t = new Tally;  // never destroyed: frees can come from static destructors
  return *t;
}

// After a call that makes something: `made` (null when the call failed) is counted until it is released.
cudaError_t made(cudaError_t err, Kind kind, const void* p, std::size_t bytes = 0) {
  Tally& t = tally();
  std::lock_guard<std::mutex> lock(t.mutex);
  if (kind == kDevice || kind == kPinned) ++t.allocation_calls;  // failed ones too
  // The runtime handing out an address still held is counted once.
  if (err == cudaSuccess && p != nullptr && t.held[kind].emplace(p, bytes).second) t.bytes[kind] += bytes;
  return err;
}

cudaError_t released(cudaError_t err, Kind kind, const void* p) {
  if (err != cudaSuccess || p == nullptr) return err;
  Tally& t = tally();
  std::lock_guard<std::mutex> lock(t.mutex);
  const auto it = t.held[kind].find(p);
  if (it != t.held[kind].end()) {  // else not ours to count (an array, a pool's own block)
    t.bytes[kind] -= static_cast<std::int64_t>(it->second);
    t.held[kind].erase(it);
  }
  return err;
}

// What an output parameter holds after the call (null when the caller passed none).
template <class T>
const void* out(T* const* p) {
  return p != nullptr ? static_cast<const void*>(*p) : nullptr;
}

// The runtime's definition of `name`. Without one the binary cannot work at all: say so and stop.
template <class Fn>
Fn next(const char* name) {
  void* symbol = dlsym(RTLD_NEXT, name);
  if (symbol == nullptr) {
    std::fprintf(stderr, "cudalab: %s not found in the CUDA runtime (dlsym: %s)\n", name, dlerror());
    std::abort();
  }
  return reinterpret_cast<Fn>(symbol);
}

#define CUDALAB_REAL(fn) static const auto real = next<decltype(&::fn)>(#fn)

}  // namespace

namespace cudalab {

ResourceTally resource_tally() {
  Tally& t = tally();
  std::lock_guard<std::mutex> lock(t.mutex);
  const auto count = [&](Kind k) { return static_cast<std::int64_t>(t.held[k].size()); };
  return {t.bytes[kDevice], count(kDevice), t.bytes[kPinned], count(kPinned), count(kStream), count(kEvent),
          t.allocation_calls};
}

std::string held_beyond(const ResourceTally& before) {
  const ResourceTally now = resource_tally();
  std::string out;
  const auto held = [&out](std::int64_t more, const std::string& what) {
    if (more != 0) out += (out.empty() ? "" : ", ") + what;
  };
  const auto memory = [](std::int64_t bytes, std::int64_t allocations, const char* kind, const char* release) {
    const std::string size =
        bytes % 1024 == 0 ? std::to_string(bytes / 1024) + " KiB" : std::to_string(bytes) + " bytes";
    return size + " of " + kind + " memory in " + std::to_string(allocations) + " allocation(s) (" + release + ")";
  };
  const std::int64_t streams = now.streams - before.streams, events = now.events - before.events;
  const std::int64_t device = now.device_bytes - before.device_bytes, pinned = now.pinned_bytes - before.pinned_bytes;
  held(streams, std::to_string(streams) + " stream(s) (cudaStreamDestroy for every stream)");
  held(events, std::to_string(events) + " event(s) (cudaEventDestroy for every event)");
  held(device, memory(device, now.device_allocations - before.device_allocations, "device",
                      "cudaFree for every cudaMalloc"));
  held(pinned, memory(pinned, now.pinned_allocations - before.pinned_allocations, "pinned",
                      "cudaFreeHost for every cudaMallocHost"));
  return out;
}

}  // namespace cudalab

// Each forwards first, then counts: an output parameter is read only after the runtime has set it.
extern "C" {

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  CUDALAB_REAL(cudaMalloc);
  const cudaError_t err = real(devPtr, size);
  return made(err, kDevice, out(devPtr), size);
}

cudaError_t cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height) {
  CUDALAB_REAL(cudaMallocPitch);
  const cudaError_t err = real(devPtr, pitch, width, height);
  return made(err, kDevice, out(devPtr), pitch != nullptr ? *pitch * height : 0);
}

cudaError_t cudaMalloc3D(struct cudaPitchedPtr* pitchedDevPtr, struct cudaExtent extent) {
  CUDALAB_REAL(cudaMalloc3D);
  const cudaError_t err = real(pitchedDevPtr, extent);
  if (pitchedDevPtr == nullptr) return made(err, kDevice, nullptr);
  return made(err, kDevice, pitchedDevPtr->ptr, pitchedDevPtr->pitch * extent.height * extent.depth);
}

cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
  CUDALAB_REAL(cudaMallocManaged);
  const cudaError_t err = real(devPtr, size, flags);
  return made(err, kDevice, out(devPtr), size);
}

cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) {
  CUDALAB_REAL(cudaMallocAsync);
  const cudaError_t err = real(devPtr, size, hStream);
  return made(err, kDevice, out(devPtr), size);
}

cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream) {
  CUDALAB_REAL(cudaMallocFromPoolAsync);
  const cudaError_t err = real(ptr, size, memPool, stream);
  return made(err, kDevice, out(ptr), size);
}

cudaError_t cudaFree(void* devPtr) {
  CUDALAB_REAL(cudaFree);
  return released(real(devPtr), kDevice, devPtr);
}

cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream) {
  CUDALAB_REAL(cudaFreeAsync);
  return released(real(devPtr, hStream), kDevice, devPtr);
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  CUDALAB_REAL(cudaMallocHost);
  const cudaError_t err = real(ptr, size);
  return made(err, kPinned, out(ptr), size);
}

cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  CUDALAB_REAL(cudaHostAlloc);
  const cudaError_t err = real(pHost, size, flags);
  return made(err, kPinned, out(pHost), size);
}

cudaError_t cudaFreeHost(void* ptr) {
  CUDALAB_REAL(cudaFreeHost);
  return released(real(ptr), kPinned, ptr);
}

cudaError_t cudaStreamCreate(cudaStream_t* pStream) {
  CUDALAB_REAL(cudaStreamCreate);
  const cudaError_t err = real(pStream);
  return made(err, kStream, out(pStream));
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  CUDALAB_REAL(cudaStreamCreateWithFlags);
  const cudaError_t err = real(pStream, flags);
  return made(err, kStream, out(pStream));
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* pStream, unsigned int flags, int priority) {
  CUDALAB_REAL(cudaStreamCreateWithPriority);
  const cudaError_t err = real(pStream, flags, priority);
  return made(err, kStream, out(pStream));
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  CUDALAB_REAL(cudaStreamDestroy);
  return released(real(stream), kStream, stream);
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  CUDALAB_REAL(cudaEventCreate);
  const cudaError_t err = real(event);
  return made(err, kEvent, out(event));
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  CUDALAB_REAL(cudaEventCreateWithFlags);
  const cudaError_t err = real(event, flags);
  return made(err, kEvent, out(event));
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  CUDALAB_REAL(cudaEventDestroy);
  return released(real(event), kEvent, event);
}

}  // extern "C"
