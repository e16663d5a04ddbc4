// cudalab_health_probe: proves that the GPU still works. The grader runs it after a test crashed,
// hung or hit a CUDA error, before it runs anything else, so a broken GPU is reported as such instead
// of being blamed on the tests that follow. Allocates, launches, copies back, checks; exit code 0 when
// all went well, else the step that failed (2 no device, 3 allocation, 4 launch, 5 copy, 6 wrong data).
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

namespace {

__global__ void fill_kernel(int* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 3 * i + 1;
}

int fail(int code, const char* step, cudaError_t err) {
  std::fprintf(stderr, "cudalab_health_probe: %s failed: %s (%s)\n", step, cudaGetErrorName(err),
               cudaGetErrorString(err));
  return code;
}

}  // namespace

int main() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) return fail(2, "cudaGetDeviceCount", err);
  constexpr int n = 1 << 16;
  int* d = nullptr;
  err = cudaMalloc(&d, n * sizeof(int));
  if (err != cudaSuccess) return fail(3, "cudaMalloc", err);
  fill_kernel<<<(n + 255) / 256, 256>>>(d, n);
  err = cudaGetLastError();
  if (err == cudaSuccess) err = cudaDeviceSynchronize();
  if (err != cudaSuccess) return fail(4, "kernel launch", err);
  std::vector<int> h(n);
  err = cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) return fail(5, "cudaMemcpy", err);
  cudaFree(d);
  for (int i = 0; i < n; ++i) {
    if (h[i] != 3 * i + 1) {
      std::fprintf(stderr, "cudalab_health_probe: element %d is %d, expected %d\n", i, h[i], 3 * i + 1);
      return 6;
    }
  }
  std::printf("cudalab_health_probe: the GPU works\n");
  return 0;
}
