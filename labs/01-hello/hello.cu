// Lab 01: a first kernel, device facts, launch errors, and a function compiled for both processors.
#include "hello.cuh"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include <cudalab/check.cuh>
#include <cudalab/launch.cuh>

[[maybe_unused]] constexpr int kBlock = 256;  // threads per block where the tests do not choose

// ---------------------------------------------------------------------------------------------
// Task 1: hello, GPU.
// ---------------------------------------------------------------------------------------------

// Every thread says which block and which thread it is. The lines arrive in no particular order:
// blocks run in whatever order the hardware picks.
__global__ void hello_kernel() {
  // TODO(student): print "hello from block B, thread T" and a newline with printf, using blockIdx.x
  //                and threadIdx.x (1 line).
}

void say_hello(int blocks, int threads) {
  // TODO(student): launch hello_kernel on blocks x threads and check the launch with CUDA_CHECK_LAST().
  //                A launch only queues the kernel, and device printf reaches stdout only when the host
  //                waits for the GPU: every line must be out before say_hello returns (about 3 lines).
}

// One thread, one add: about the least work a kernel can do, so timing it shows the launch cost.
__global__ void tick_kernel(unsigned int* counter) {
  // TODO(student): add 1 to *counter (1 line).
}

void tick(unsigned int* d_counter) {
  // TODO(student): launch tick_kernel with one block of one thread and check the launch. Do not
  //                synchronize here (2 lines).
}

// ---------------------------------------------------------------------------------------------
// Task 2: a record per thread.
// ---------------------------------------------------------------------------------------------

// Each thread writes who it is at its own global index, so no two threads touch the same record.
__global__ void record_kernel(ThreadRecord* records) {
  // TODO(student): compute this thread's global index and write its ThreadRecord there (about 3 lines).
}

void record_threads(ThreadRecord* d_records, int blocks, int threads) {
  // TODO(student): launch record_kernel on blocks x threads and check the launch (2 lines).
}

// ---------------------------------------------------------------------------------------------
// Task 3: device facts. cudaGetDeviceProperties still gives the name, the compute capability and
// the sizes; since CUDA 13 the clocks exist only as attributes (cudaDeviceGetAttribute).
// ---------------------------------------------------------------------------------------------

DeviceFacts query_device(int device) {
  DeviceFacts f;
  // TODO(student): fill every field of f for `device`, every call wrapped in CUDA_CHECK (about 15 lines).
  //   cudaGetDeviceProperties: name, major, minor, multiProcessorCount, totalGlobalMem, l2CacheSize,
  //     warpSize, maxThreadsPerBlock, maxThreadsPerMultiProcessor, sharedMemPerBlockOptin.
  //   cudaDeviceGetAttribute: cudaDevAttrClockRate, cudaDevAttrMemoryClockRate,
  //     cudaDevAttrGlobalMemoryBusWidth.
  return f;
}

double peak_dram_bandwidth_gbps(const DeviceFacts& facts) {
  // TODO(student): the peak bandwidth hello.cuh describes, in GB/s, from the memory clock and the bus
  //                width. Mind the units (kHz, bits) and use double: an int overflows (about 3 lines).
  return 0.0;
}

// ---------------------------------------------------------------------------------------------
// Task 4: catching a bad launch. A launch with an impossible configuration (more than 1024 threads
// per block, zero blocks) never runs; the runtime records the error, and cudaGetLastError() both
// returns it and resets it to cudaSuccess.
// ---------------------------------------------------------------------------------------------

__global__ void fill_kernel(int* out, int value) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  out[i] = value + i;
}

cudaError_t fill_checked(int* d_out, int value, int blocks, int threads) {
  // TODO(student): launch fill_kernel on blocks x threads and return what went wrong, as a code: the
  //                launch's own error if it could not run (waiting never reports that one), else what the
  //                kernel's run reports, once it has finished. Leave no error pending, and throw nothing:
  //                no CUDA_CHECK here, the caller wants the code (about 4 lines).
  return cudaSuccess;
}

// ---------------------------------------------------------------------------------------------
// Task 5: one function, two processors. __host__ __device__ makes nvcc compile it for the CPU and
// for the GPU; the kernel below calls the GPU copy.
// ---------------------------------------------------------------------------------------------

__host__ __device__ int collatz_steps(std::uint32_t n) {
  if (n == 0) return -1;  // 0 never reaches 1
  // TODO(student): count the steps from n to 1. Keep the running value in 64 bits: some
  //                trajectories climb far above 2^32 (about 6 lines).
  return -1;
}

// One thread per input; the guard keeps the last block's extra threads idle.
__global__ void collatz_kernel(const std::uint32_t* n, int* steps, int count) {
  // TODO(student): global index, guard, call collatz_steps (about 2 lines).
}

void collatz_steps_on_device(const std::uint32_t* d_n, int* d_steps, int count) {
  if (count <= 0) return;  // a grid of zero blocks is an invalid launch
  // TODO(student): launch collatz_kernel with enough blocks of kBlock threads to cover count, and
  //                check the launch (2 lines).
}
