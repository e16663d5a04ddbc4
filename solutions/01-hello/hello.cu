// Lab 01: a first kernel, device facts, launch errors, and a function compiled for both processors.
// Reference solution. Regions between BEGIN/END SOLUTION are removed from the student's copy, and
// "STUB:" lines become code there (python3 -m grader skeleton --write).
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
  // BEGIN SOLUTION
  printf("hello from block %u, thread %u\n", blockIdx.x, threadIdx.x);
  // END SOLUTION
}

void say_hello(int blocks, int threads) {
  // TODO(student): launch hello_kernel on blocks x threads and check the launch with CUDA_CHECK_LAST().
  //                A launch only queues the kernel, and device printf reaches stdout only when the host
  //                waits for the GPU: every line must be out before say_hello returns (about 3 lines).
  // BEGIN SOLUTION
  hello_kernel<<<blocks, threads>>>();
  CUDA_CHECK_LAST();
  // A launch returns at once; without this wait the lines would still sit in the device's buffer.
  CUDA_CHECK(cudaDeviceSynchronize());
  // END SOLUTION
}

// One thread, one add: about the least work a kernel can do, so timing it shows the launch cost.
__global__ void tick_kernel(unsigned int* counter) {
  // TODO(student): add 1 to *counter (1 line).
  // BEGIN SOLUTION
  *counter += 1;
  // END SOLUTION
}

void tick(unsigned int* d_counter) {
  // TODO(student): launch tick_kernel with one block of one thread and check the launch. Do not
  //                synchronize here (2 lines).
  // BEGIN SOLUTION
  tick_kernel<<<1, 1>>>(d_counter);
  CUDA_CHECK_LAST();
  // END SOLUTION
}

// ---------------------------------------------------------------------------------------------
// Task 2: a record per thread.
// ---------------------------------------------------------------------------------------------

// Each thread writes who it is at its own global index, so no two threads touch the same record.
__global__ void record_kernel(ThreadRecord* records) {
  // TODO(student): compute this thread's global index and write its ThreadRecord there (about 3 lines).
  // BEGIN SOLUTION
  const int global = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  records[global] = ThreadRecord{static_cast<int>(blockIdx.x), static_cast<int>(threadIdx.x), global};
  // END SOLUTION
}

void record_threads(ThreadRecord* d_records, int blocks, int threads) {
  // TODO(student): launch record_kernel on blocks x threads and check the launch (2 lines).
  // BEGIN SOLUTION
  record_kernel<<<blocks, threads>>>(d_records);
  CUDA_CHECK_LAST();
  // END SOLUTION
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
  // BEGIN SOLUTION
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  f.name = prop.name;
  f.cc_major = prop.major;
  f.cc_minor = prop.minor;
  f.sm_count = prop.multiProcessorCount;
  f.global_memory_bytes = prop.totalGlobalMem;
  f.l2_cache_bytes = prop.l2CacheSize;
  f.warp_size = prop.warpSize;
  f.max_threads_per_block = prop.maxThreadsPerBlock;
  f.max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
  f.shared_memory_per_block_optin = prop.sharedMemPerBlockOptin;
  CUDA_CHECK(cudaDeviceGetAttribute(&f.sm_clock_khz, cudaDevAttrClockRate, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&f.memory_clock_khz, cudaDevAttrMemoryClockRate, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&f.memory_bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
  // END SOLUTION
  return f;
}

double peak_dram_bandwidth_gbps(const DeviceFacts& facts) {
  // TODO(student): the peak bandwidth hello.cuh describes, in GB/s, from the memory clock and the bus
  //                width. Mind the units (kHz, bits) and use double: an int overflows (about 3 lines).
  // BEGIN SOLUTION
  const double transfers_per_s = 2.0 * facts.memory_clock_khz * 1e3;
  const double bytes_per_transfer = facts.memory_bus_bits / 8.0;
  return transfers_per_s * bytes_per_transfer / 1e9;
  // END SOLUTION
  // STUB: return 0.0;
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
  // BEGIN SOLUTION
  fill_kernel<<<blocks, threads>>>(d_out, value);
  const cudaError_t launch = cudaGetLastError();  // also clears it, so nothing stays pending
  if (launch != cudaSuccess) return launch;
  // Faults inside the kernel (a bad address, say) appear only once we wait for it.
  return cudaDeviceSynchronize();
  // END SOLUTION
  // STUB: return cudaSuccess;
}

// ---------------------------------------------------------------------------------------------
// Task 5: one function, two processors. __host__ __device__ makes nvcc compile it for the CPU and
// for the GPU; the kernel below calls the GPU copy.
// ---------------------------------------------------------------------------------------------

__host__ __device__ int collatz_steps(std::uint32_t n) {
  if (n == 0) return -1;  // 0 never reaches 1
  // TODO(student): count the steps from n to 1. Keep the running value in 64 bits: some
  //                trajectories climb far above 2^32 (about 6 lines).
  // BEGIN SOLUTION
  std::uint64_t v = n;
  int steps = 0;
  while (v != 1) {
    v = (v % 2 == 0) ? v / 2 : 3 * v + 1;
    ++steps;
  }
  return steps;
  // END SOLUTION
  // STUB: return -1;
}

// One thread per input; the guard keeps the last block's extra threads idle.
__global__ void collatz_kernel(const std::uint32_t* n, int* steps, int count) {
  // TODO(student): global index, guard, call collatz_steps (about 2 lines).
  // BEGIN SOLUTION
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < count) steps[i] = collatz_steps(n[i]);
  // END SOLUTION
}

void collatz_steps_on_device(const std::uint32_t* d_n, int* d_steps, int count) {
  if (count <= 0) return;  // a grid of zero blocks is an invalid launch
  // TODO(student): launch collatz_kernel with enough blocks of kBlock threads to cover count, and
  //                check the launch (2 lines).
  // BEGIN SOLUTION
  collatz_kernel<<<cudalab::ceil_div(count, kBlock), kBlock>>>(d_n, d_steps, count);
  CUDA_CHECK_LAST();
  // END SOLUTION
}
