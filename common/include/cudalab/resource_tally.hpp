// What this process holds through the CUDA runtime, counted as it happens: device and pinned host
// memory, streams and events. Every lab test binary defines the runtime's functions that create and
// release them itself (common/src/resource_tally.cpp) and exports them, so the lab's code library,
// linked against the runtime, calls them too; each forwards to the runtime's own. Unlike cudaMemGetInfo,
// which counts the whole GPU, nothing another process does on the same GPU moves these numbers: a leak
// test built on them gives the same answer on a shared GPU (a batch running several test binaries at once).
#pragma once

#include <cstdint>
#include <string>

namespace cudalab {

struct ResourceTally {
  std::int64_t device_bytes = 0;        // cudaMalloc, cudaMallocPitch, cudaMalloc3D, cudaMallocManaged,
  std::int64_t device_allocations = 0;  // cudaMallocAsync, cudaMallocFromPoolAsync; less what was freed
  std::int64_t pinned_bytes = 0;        // cudaMallocHost, cudaHostAlloc; less cudaFreeHost
  std::int64_t pinned_allocations = 0;
  std::int64_t streams = 0;  // cudaStreamCreate[WithFlags|WithPriority]; less cudaStreamDestroy
  std::int64_t events = 0;   // cudaEventCreate[WithFlags]; less cudaEventDestroy
  std::int64_t allocation_calls = 0;  // every memory allocation call seen, failed ones included
};

// What the process holds now (a consistent snapshot).
ResourceTally resource_tally();

// What the process holds now beyond `before`, in words, each kind with what releases it ("2 stream(s)
// (cudaStreamDestroy for every stream), 4096 KiB of device memory in 1 allocation(s) (cudaFree for
// every cudaMalloc)"); empty when it holds exactly what it held then. A leak test's message.
std::string held_beyond(const ResourceTally& before);

}  // namespace cudalab
