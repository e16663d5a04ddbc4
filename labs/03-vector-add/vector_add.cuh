// Lab 03 contract: the functions the tests call. Do not edit; implement them in vector_add.cu.
#pragma once

#include <cstddef>
#include <vector>

// Task 1: the whole host flow. Returns a + b computed on the GPU: allocate device memory, copy the
// inputs over, launch, copy the result back, free everything. Every CUDA call is checked.
std::vector<float> vector_add_host(const std::vector<float>& a, const std::vector<float>& b);

// Task 2: one thread per element, grid rounded up with ceil_div, guard i < n.
// All pointers are device pointers (the d_ prefix); c = a + b elementwise.
void vector_add(const float* d_a, const float* d_b, float* d_c, int n);

// Task 3: a grid-stride loop on exactly the grid it is given (blocks x threads), for any n,
// including n far larger than blocks * threads.
void vector_add_grid_stride(const float* d_a, const float* d_b, float* d_c, std::size_t n, int blocks,
                            int threads);

// Task 4: memory coalescing. The same update, x *= s, on an array of structures and on a structure
// of arrays. Only the x field may change.
struct Particle {
  float x, y, z;     // position
  float vx, vy, vz;  // velocity
  float mass, charge;
};
void scale_x_aos(Particle* d_particles, std::size_t n, float s);
void scale_x_soa(float* d_x, std::size_t n, float s);

// Task 5: page-locked (pinned) host memory, which the GPU's copy engines can read directly.
float* allocate_pinned(std::size_t n);  // n floats of pinned host memory
void free_pinned(float* h_pinned);

// Challenge: as fast as you can make it (any n, any alignment of n). Timed against thrust::transform.
void vector_add_fast(const float* d_a, const float* d_b, float* d_c, std::size_t n);
