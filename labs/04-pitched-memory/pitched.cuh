// Lab 04 contract: the functions the tests call. Do not edit; implement them in pitched.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

// A 2D array of floats in device memory whose rows start `pitch` bytes apart. Row y begins at
// (char*)data + y * pitch; its first width * sizeof(float) bytes are the row, the rest up to pitch is
// padding that belongs to nobody.
struct PitchedImage {
  float* data = nullptr;
  std::size_t pitch = 0;  // bytes, >= width * sizeof(float)
  int width = 0;          // floats per row
  int height = 0;         // rows
};

// ---------------------------------------------------------------------------------------------
// Task 1: upload and download.
// ---------------------------------------------------------------------------------------------

// Allocates a width x height pitched array with cudaMallocPitch and copies `host` (width * height
// floats, rows back to back) into it with cudaMemcpy2D.
PitchedImage upload_pitched(const std::vector<float>& host, int width, int height);

// Copies a pitched array back into width * height floats, rows back to back, with cudaMemcpy2D.
std::vector<float> download_pitched(const PitchedImage& image);

// Frees the array and resets `image` to empty.
void free_pitched(PitchedImage& image);

// ---------------------------------------------------------------------------------------------
// Task 2: a map over pitched rows. Challenge: the same map at memory speed.
// ---------------------------------------------------------------------------------------------

// out(x, y) = a * in(x, y) + b for every x < width, y < height. Pitches are in bytes (multiples of 4)
// and may differ between in and out. Only the rows' elements are written, never the padding.
// One thread per element.
void map_affine(const float* d_in, std::size_t in_pitch, float* d_out, std::size_t out_pitch, int width,
                int height, float a, float b);

// The same result as fast as you can make it (timed against a 1D cudaMemcpy of the same bytes).
void map_affine_fast(const float* d_in, std::size_t in_pitch, float* d_out, std::size_t out_pitch, int width,
                     int height, float a, float b);

// ---------------------------------------------------------------------------------------------
// Task 3: a 3x3 filter with its weights in constant memory.
// ---------------------------------------------------------------------------------------------

// Copies the 9 weights, row by row, into __constant__ memory (cudaMemcpyToSymbol). They stay there
// for every later call of filter3x3, until the next set_filter_weights.
void set_filter_weights(const float weights[9]);

// out(x, y) = sum over r, c in 0..2 of  w[r * 3 + c] * in(clamp(x + c - 1), clamp(y + r - 1))
// where clamp keeps a column in 0..width-1 and a row in 0..height-1 (clamp-to-edge: a pixel outside
// the image takes the value of the nearest edge pixel). w[4] is the centre weight, w[0] the weight of
// the upper-left neighbour (x - 1, y - 1). Pitches in bytes; the padding is never written.
void filter3x3(const float* d_in, std::size_t in_pitch, float* d_out, std::size_t out_pitch, int width,
               int height);
