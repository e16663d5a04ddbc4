// The runtime's functions that create and release memory, streams and events, defined in the test
// binary: each calls the runtime's own (the next definition in load order: dlsym(RTLD_NEXT)) and keeps
// the tally of cudalab/resource_tally.hpp.
// The test binary exports them (cmake/test-binary.dynamic), so the lab's code library binds its calls
// here too. Only the tests read the tally; it decides nothing about what the code may call.
#include <cudalab/resource_tally.hpp>

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

namespace {

enum class Kind { device, pinned };

struct Held {
  std::size_t bytes;
  Kind kind;
};

struct Tally {
  std::mutex mutex;
  std::unordered_map<const void*, Held> live;
  std::unordered_set<const void*> streams, events;
  cudalab::ResourceTally totals;
};

Tally& tally() {
  static Tally* t = new Tally;  // never destroyed: frees can come from static destructors
  return *t;
}

void count_call() {
  Tally& t = tally();
  std::lock_guard<std::mutex> lock(t.mutex);
  ++t.totals.allocation_calls;
}

void add(const void* p, std::size_t bytes, Kind kind) {
  if (p == nullptr) return;
  Tally& t = tally();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto [it, inserted] = t.live.emplace(p, Held{bytes, kind});
  if (!inserted) return;  // the runtime handed out an address still held: count it once
  auto& total = t.totals;
  (kind == Kind::device ? total.device_bytes : total.pinned_bytes) += static_cast<std::int64_t>(bytes);
  ++(kind == Kind::device ? total.device_allocations : total.pinned_allocations);
}

void remove(const void* p) {
  if (p == nullptr) return;
  Tally& t = tally();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.live.find(p);
  if (it == t.live.end()) return;  // not ours to count (an array, a pool's own block)
  auto& total = t.totals;
  (it->second.kind == Kind::device ? total.device_bytes : total.pinned_bytes) -= static_cast<std::int64_t>(it->second.bytes);
  --(it->second.kind == Kind::device ? total.device_allocations : total.pinned_allocations);
  t.live.erase(it);
}

// A stream or an event: counted while its handle is alive.
void add_handle(std::unordered_set<const void*> Tally::*handles, std::int64_t cudalab::ResourceTally::*count,
                const void* h) {
  if (h == nullptr) return;
  Tally& t = tally();
  std::lock_guard<std::mutex> lock(t.mutex);
  if ((t.*handles).insert(h).second) ++(t.totals.*count);
}

void remove_handle(std::unordered_set<const void*> Tally::*handles, std::int64_t cudalab::ResourceTally::*count,
                   const void* h) {
  Tally& t = tally();
  std::lock_guard<std::mutex> lock(t.mutex);
  if ((t.*handles).erase(h) > 0) --(t.totals.*count);
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
  return t.totals;
}

}  // namespace cudalab

extern "C" {

cudaError_t cudaMalloc(void** devPtr, size_t size) {
  CUDALAB_REAL(cudaMalloc);
  count_call();
  const cudaError_t err = real(devPtr, size);
  if (err == cudaSuccess && devPtr != nullptr) add(*devPtr, size, Kind::device);
  return err;
}

cudaError_t cudaMallocPitch(void** devPtr, size_t* pitch, size_t width, size_t height) {
  CUDALAB_REAL(cudaMallocPitch);
  count_call();
  const cudaError_t err = real(devPtr, pitch, width, height);
  if (err == cudaSuccess && devPtr != nullptr && pitch != nullptr) add(*devPtr, *pitch * height, Kind::device);
  return err;
}

cudaError_t cudaMalloc3D(struct cudaPitchedPtr* pitchedDevPtr, struct cudaExtent extent) {
  CUDALAB_REAL(cudaMalloc3D);
  count_call();
  const cudaError_t err = real(pitchedDevPtr, extent);
  if (err == cudaSuccess && pitchedDevPtr != nullptr)
    add(pitchedDevPtr->ptr, pitchedDevPtr->pitch * extent.height * extent.depth, Kind::device);
  return err;
}

cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags) {
  CUDALAB_REAL(cudaMallocManaged);
  count_call();
  const cudaError_t err = real(devPtr, size, flags);
  if (err == cudaSuccess && devPtr != nullptr) add(*devPtr, size, Kind::device);
  return err;
}

cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) {
  CUDALAB_REAL(cudaMallocAsync);
  count_call();
  const cudaError_t err = real(devPtr, size, hStream);
  if (err == cudaSuccess && devPtr != nullptr) add(*devPtr, size, Kind::device);
  return err;
}

cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t memPool, cudaStream_t stream) {
  CUDALAB_REAL(cudaMallocFromPoolAsync);
  count_call();
  const cudaError_t err = real(ptr, size, memPool, stream);
  if (err == cudaSuccess && ptr != nullptr) add(*ptr, size, Kind::device);
  return err;
}

cudaError_t cudaFree(void* devPtr) {
  CUDALAB_REAL(cudaFree);
  const cudaError_t err = real(devPtr);
  if (err == cudaSuccess) remove(devPtr);
  return err;
}

cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream) {
  CUDALAB_REAL(cudaFreeAsync);
  const cudaError_t err = real(devPtr, hStream);
  if (err == cudaSuccess) remove(devPtr);
  return err;
}

cudaError_t cudaMallocHost(void** ptr, size_t size) {
  CUDALAB_REAL(cudaMallocHost);
  count_call();
  const cudaError_t err = real(ptr, size);
  if (err == cudaSuccess && ptr != nullptr) add(*ptr, size, Kind::pinned);
  return err;
}

cudaError_t cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  CUDALAB_REAL(cudaHostAlloc);
  count_call();
  const cudaError_t err = real(pHost, size, flags);
  if (err == cudaSuccess && pHost != nullptr) add(*pHost, size, Kind::pinned);
  return err;
}

cudaError_t cudaFreeHost(void* ptr) {
  CUDALAB_REAL(cudaFreeHost);
  const cudaError_t err = real(ptr);
  if (err == cudaSuccess) remove(ptr);
  return err;
}

cudaError_t cudaStreamCreate(cudaStream_t* pStream) {
  CUDALAB_REAL(cudaStreamCreate);
  const cudaError_t err = real(pStream);
  if (err == cudaSuccess && pStream != nullptr) add_handle(&Tally::streams, &cudalab::ResourceTally::streams, *pStream);
  return err;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  CUDALAB_REAL(cudaStreamCreateWithFlags);
  const cudaError_t err = real(pStream, flags);
  if (err == cudaSuccess && pStream != nullptr) add_handle(&Tally::streams, &cudalab::ResourceTally::streams, *pStream);
  return err;
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* pStream, unsigned int flags, int priority) {
  CUDALAB_REAL(cudaStreamCreateWithPriority);
  const cudaError_t err = real(pStream, flags, priority);
  if (err == cudaSuccess && pStream != nullptr) add_handle(&Tally::streams, &cudalab::ResourceTally::streams, *pStream);
  return err;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  CUDALAB_REAL(cudaStreamDestroy);
  const cudaError_t err = real(stream);
  if (err == cudaSuccess) remove_handle(&Tally::streams, &cudalab::ResourceTally::streams, stream);
  return err;
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  CUDALAB_REAL(cudaEventCreate);
  const cudaError_t err = real(event);
  if (err == cudaSuccess && event != nullptr) add_handle(&Tally::events, &cudalab::ResourceTally::events, *event);
  return err;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  CUDALAB_REAL(cudaEventCreateWithFlags);
  const cudaError_t err = real(event, flags);
  if (err == cudaSuccess && event != nullptr) add_handle(&Tally::events, &cudalab::ResourceTally::events, *event);
  return err;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  CUDALAB_REAL(cudaEventDestroy);
  const cudaError_t err = real(event);
  if (err == cudaSuccess) remove_handle(&Tally::events, &cudalab::ResourceTally::events, event);
  return err;
}

}  // extern "C"
