// Lab 01 contract: the functions the tests call. Do not edit; implement them in hello.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

// ---------------------------------------------------------------------------------------------
// Task 1: hello, GPU.
// ---------------------------------------------------------------------------------------------

// Launches a kernel on `blocks` blocks of `threads` threads. Every thread prints exactly one line
//   hello from block <blockIdx.x>, thread <threadIdx.x>
// with device printf, and the function returns only after the GPU has finished, so every line has
// reached stdout by then.
void say_hello(int blocks, int threads);

// The smallest useful kernel: one thread adds 1 to *d_counter. Launches it and checks the launch; it
// does not wait for the GPU (the perf test launches it back to back).
void tick(unsigned int* d_counter);

// ---------------------------------------------------------------------------------------------
// Task 2: a record per thread.
// ---------------------------------------------------------------------------------------------

// What one thread writes about itself.
struct ThreadRecord {
  int block;   // blockIdx.x
  int thread;  // threadIdx.x
  int global;  // blockIdx.x * blockDim.x + threadIdx.x
};

// Launches `blocks` x `threads` threads; each writes its record at d_records[global].
// d_records has blocks * threads elements. Returns after the launch is checked (no need to wait).
void record_threads(ThreadRecord* d_records, int blocks, int threads);

// ---------------------------------------------------------------------------------------------
// Task 3: facts about the device, asked the CUDA 13 way.
// ---------------------------------------------------------------------------------------------

struct DeviceFacts {
  std::string name;                // "NVIDIA H100 80GB HBM3", for example
  int cc_major = 0;                // compute capability, major.minor (9.0 for Hopper)
  int cc_minor = 0;
  int sm_count = 0;                // streaming multiprocessors
  int sm_clock_khz = 0;            // peak SM clock, kHz
  int memory_clock_khz = 0;        // peak memory clock, kHz
  int memory_bus_bits = 0;         // width of the memory bus, bits
  std::size_t global_memory_bytes = 0;
  int l2_cache_bytes = 0;
  int warp_size = 0;
  int max_threads_per_block = 0;
  int max_threads_per_sm = 0;
  std::size_t shared_memory_per_block_optin = 0;  // the most a block may opt in to, bytes
};

// Facts about device `device`. CUDA 13 removed cudaDeviceProp::clockRate and memoryClockRate: the
// clocks come from cudaDeviceGetAttribute.
DeviceFacts query_device(int device);

// Theoretical DRAM bandwidth in GB/s (1 GB = 1e9 bytes): two transfers per memory clock (double data
// rate) over the whole bus.
double peak_dram_bandwidth_gbps(const DeviceFacts& facts);

// ---------------------------------------------------------------------------------------------
// Task 4: catching a bad launch.
// ---------------------------------------------------------------------------------------------

// Launches `blocks` x `threads` threads; each writes value + (its global index) at d_out[global].
// Returns the launch's error if the launch failed, leaving no error pending; otherwise waits for the
// kernel and returns what the wait reports (cudaSuccess when all went well). Never throws.
cudaError_t fill_checked(int* d_out, int value, int blocks, int threads);

// ---------------------------------------------------------------------------------------------
// Task 5: one function, two processors.
// ---------------------------------------------------------------------------------------------

// Steps the Collatz map (n even: n / 2; n odd: 3n + 1) needs to reach 1 from n >= 1.
// collatz_steps(1) == 0, collatz_steps(6) == 8. Compiled for both the CPU and the GPU; the tests call
// it on the host directly and on the device through the function below.
__host__ __device__ int collatz_steps(std::uint32_t n);

// The same function on the GPU: d_steps[i] = collatz_steps(d_n[i]) for i < count, one thread each.
void collatz_steps_on_device(const std::uint32_t* d_n, int* d_steps, int count);
