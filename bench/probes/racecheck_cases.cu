// Racecheck probe cases (bench/probes/racecheck.sh): does racecheck see (a) a plain shared-memory race
// with and without -rdc, (b) the same in a program that also launches from the device, (c) shared atomics?
#include <cstdio>
__global__ void plain_race(int* out) {  // every thread writes s[t], thread t reads s[t+1]: no barrier
  __shared__ int s[257];
  s[threadIdx.x] = threadIdx.x;
  out[threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}
__global__ void atomic_then_read(const int* in, int* out) {  // atomics, then a read with no barrier
  __shared__ int bins[32];
  if (threadIdx.x < 32) bins[threadIdx.x] = 0;
  __syncthreads();
  atomicAdd(&bins[in[threadIdx.x] & 31], 1);
  if (threadIdx.x < 32) out[threadIdx.x] = bins[threadIdx.x];
}
__global__ void zero_then_atomic(const int* in, int* out) {  // zeroing races the atomics: no barrier
  __shared__ int bins[32];
  if (threadIdx.x < 32) bins[threadIdx.x] = 0;
  atomicAdd(&bins[in[threadIdx.x] & 31], 1);
  __syncthreads();
  if (threadIdx.x < 32) out[threadIdx.x] = bins[threadIdx.x];
}
#ifdef CDP
__global__ void child(int* out) { out[threadIdx.x] += 1; }
__global__ void parent(int* out) {
  plain_race<<<1, 256>>>(out);  // a device-side launch of the racy kernel
  child<<<1, 32, 0, cudaStreamTailLaunch>>>(out);
}
#endif
int main(int argc, char** argv) {
  int *in, *out;
  cudaMalloc(&in, 1024 * sizeof(int));
  cudaMalloc(&out, 1024 * sizeof(int));
  cudaMemset(in, 0, 1024 * sizeof(int));  // every thread hits bin 0
  const char* which = argc > 1 ? argv[1] : "plain";
  if (which[0] == 'p') plain_race<<<1, 256>>>(out);
  if (which[0] == 'a') atomic_then_read<<<1, 256>>>(in, out);
  if (which[0] == 'z') zero_then_atomic<<<1, 256>>>(in, out);
#ifdef CDP
  if (which[0] == 'd') parent<<<1, 1>>>(out);
#endif
  cudaError_t e = cudaDeviceSynchronize();
  printf("%s: %s\n", which, cudaGetErrorString(e));
  return 0;
}
