// Self-tests of the resource tally (cudalab/resource_tally.hpp): every allocation call reaches it, from
// the test binary and from a library linked like a lab's code; on a GPU each API adds and releases
// what it holds (bytes, streams, events), and nothing else moves the numbers.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include <cudalab/gtest_cuda.hpp>
#include <cudalab/resource_tally.hpp>

cudaError_t tally_probe_malloc(void** p, std::size_t bytes);
cudaError_t tally_probe_free(void* p);
cudaError_t tally_probe_malloc_host(void** p, std::size_t bytes);
cudaError_t tally_probe_free_host(void* p);
cudaError_t tally_probe_stream(cudaStream_t* s);
cudaError_t tally_probe_event(cudaEvent_t* e);

namespace {

constexpr std::size_t kBytes = std::size_t{3} << 20;

// No GPU needed: a failed call is still seen, so this shows the binding without a device.
TEST(ResourceTallyLinking, CallsFromTheBinaryAndFromALabLibraryAreSeen) {
  const auto start = cudalab::resource_tally().allocation_calls;
  void* p = nullptr;
  const cudaError_t own = cudaMalloc(&p, kBytes);
  EXPECT_EQ(cudalab::resource_tally().allocation_calls, start + 1);
  void* q = nullptr;
  const cudaError_t lib = tally_probe_malloc(&q, kBytes);
  EXPECT_EQ(cudalab::resource_tally().allocation_calls, start + 2)
      << "a library's cudaMalloc did not reach the test binary's: is cmake/test-binary.dynamic linked?";
  if (own == cudaSuccess) cudaFree(p);
  if (lib == cudaSuccess) tally_probe_free(q);
  cudaGetLastError();
}

class ResourceTally : public cudalab::GpuTest {};

TEST_F(ResourceTally, DeviceBytesComeAndGo) {
  const auto before = cudalab::resource_tally();
  void* a = nullptr;
  void* b = nullptr;
  CUDA_CHECK(cudaMalloc(&a, kBytes));
  CUDA_CHECK(tally_probe_malloc(&b, 2 * kBytes));
  auto now = cudalab::resource_tally();
  EXPECT_EQ(now.device_bytes - before.device_bytes, static_cast<std::int64_t>(3 * kBytes));
  EXPECT_EQ(now.device_allocations - before.device_allocations, 2);
  EXPECT_EQ(cudalab::held_beyond(before),
            "9216 KiB of device memory in 2 allocation(s) (cudaFree for every cudaMalloc)");
  CUDA_CHECK(tally_probe_free(a));  // freed from the library, allocated in the binary: one tally
  CUDA_CHECK(cudaFree(b));
  now = cudalab::resource_tally();
  EXPECT_EQ(now.device_bytes, before.device_bytes);
  EXPECT_EQ(now.device_allocations, before.device_allocations);
  EXPECT_EQ(cudalab::held_beyond(before), "");
}

TEST_F(ResourceTally, PitchedAnd3DCountWhatTheRuntimeGave) {
  const auto before = cudalab::resource_tally();
  void* p = nullptr;
  std::size_t pitch = 0;
  CUDA_CHECK(cudaMallocPitch(&p, &pitch, 1000, 37));
  EXPECT_GE(pitch, 1000u);
  EXPECT_EQ(cudalab::resource_tally().device_bytes - before.device_bytes, static_cast<std::int64_t>(pitch * 37));
  cudaPitchedPtr v{};
  CUDA_CHECK(cudaMalloc3D(&v, make_cudaExtent(300, 5, 4)));
  EXPECT_EQ(cudalab::resource_tally().device_bytes - before.device_bytes,
            static_cast<std::int64_t>(pitch * 37 + v.pitch * 5 * 4));
  CUDA_CHECK(cudaFree(p));
  CUDA_CHECK(cudaFree(v.ptr));
  EXPECT_EQ(cudalab::resource_tally().device_bytes, before.device_bytes);
}

TEST_F(ResourceTally, StreamOrderedAndManaged) {
  const auto before = cudalab::resource_tally();
  void* a = nullptr;
  void* m = nullptr;
  CUDA_CHECK(cudaMallocAsync(&a, kBytes, nullptr));
  CUDA_CHECK(cudaMallocManaged(&m, kBytes, cudaMemAttachGlobal));
  EXPECT_EQ(cudalab::resource_tally().device_bytes - before.device_bytes, static_cast<std::int64_t>(2 * kBytes));
  CUDA_CHECK(cudaFreeAsync(a, nullptr));
  CUDA_CHECK(cudaFree(m));
  CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(cudalab::resource_tally().device_bytes, before.device_bytes);
}

TEST_F(ResourceTally, PinnedHostMemoryIsItsOwnCount) {
  const auto before = cudalab::resource_tally();
  void* h = nullptr;
  void* g = nullptr;
  CUDA_CHECK(tally_probe_malloc_host(&h, kBytes));
  CUDA_CHECK(cudaHostAlloc(&g, kBytes, cudaHostAllocDefault));
  auto now = cudalab::resource_tally();
  EXPECT_EQ(now.pinned_bytes - before.pinned_bytes, static_cast<std::int64_t>(2 * kBytes));
  EXPECT_EQ(now.device_bytes, before.device_bytes);
  CUDA_CHECK(cudaFreeHost(h));
  CUDA_CHECK(tally_probe_free_host(g));
  EXPECT_EQ(cudalab::resource_tally().pinned_bytes, before.pinned_bytes);
}

TEST_F(ResourceTally, StreamsAndEventsAreCountedWhileAlive) {
  const auto before = cudalab::resource_tally();
  cudaStream_t s1 = nullptr, s2 = nullptr, s3 = nullptr;
  cudaEvent_t e1 = nullptr, e2 = nullptr;
  CUDA_CHECK(cudaStreamCreate(&s1));
  CUDA_CHECK(tally_probe_stream(&s2));
  CUDA_CHECK(cudaStreamCreateWithPriority(&s3, cudaStreamDefault, 0));
  CUDA_CHECK(cudaEventCreate(&e1));
  CUDA_CHECK(tally_probe_event(&e2));
  auto now = cudalab::resource_tally();
  EXPECT_EQ(now.streams - before.streams, 3);
  EXPECT_EQ(now.events - before.events, 2);
  CUDA_CHECK(cudaStreamDestroy(s1));
  CUDA_CHECK(cudaStreamDestroy(s2));
  CUDA_CHECK(cudaEventDestroy(e1));
  now = cudalab::resource_tally();
  EXPECT_EQ(now.streams - before.streams, 1);  // s3 still alive
  EXPECT_EQ(now.events - before.events, 1);    // e2 still alive
  EXPECT_EQ(cudalab::held_beyond(before),
            "1 stream(s) (cudaStreamDestroy for every stream), 1 event(s) (cudaEventDestroy for every event)");
  CUDA_CHECK(cudaStreamDestroy(s3));
  CUDA_CHECK(cudaEventDestroy(e2));
  now = cudalab::resource_tally();
  EXPECT_EQ(now.streams, before.streams);
  EXPECT_EQ(now.events, before.events);
  EXPECT_EQ(now.device_bytes, before.device_bytes);
}

TEST_F(ResourceTally, FailuresAndStrangersMoveNothing) {
  const auto before = cudalab::resource_tally();
  void* p = nullptr;
  EXPECT_NE(cudaMalloc(&p, std::size_t{1} << 62), cudaSuccess);  // far beyond any GPU
  cudaGetLastError();
  int on_stack = 0;
  EXPECT_NE(cudaFree(&on_stack), cudaSuccess);  // not an allocation of ours (or of anyone's)
  cudaGetLastError();
  CUDA_CHECK(cudaFree(nullptr));
  const auto after = cudalab::resource_tally();
  EXPECT_EQ(after.device_bytes, before.device_bytes);
  EXPECT_EQ(after.device_allocations, before.device_allocations);
}

TEST_F(ResourceTally, ThreadsAllocatingAtOnceBalance) {
  const auto before = cudalab::resource_tally();
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 50; ++i) {
        void* p = nullptr;
        if (cudaMalloc(&p, 4096) == cudaSuccess) cudaFree(p);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(cudalab::resource_tally().device_bytes, before.device_bytes);
  EXPECT_EQ(cudalab::resource_tally().allocation_calls - before.allocation_calls, 400);
}

}  // namespace
