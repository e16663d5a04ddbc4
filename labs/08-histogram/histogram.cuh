// Lab 08 contract: the functions the tests call. Do not edit; implement them in histogram.cu.
//
// Every function counts into device memory and owns its output: it sets every bin to zero first
// (the tests fill the bins with garbage before each call), then adds the counts. Counts are exact.
// Input pointers come from cudaMalloc, so they are aligned to 256 bytes and may be read as uint4.
// n may be any size, including 1 and sizes that are not a multiple of anything.
#pragma once

#include <cstddef>

constexpr int kNumBins = 256;  // byte histogram: one bin per value 0..255
constexpr int kTextBins = 7;   // text histogram: a-d, e-h, i-l, m-p, q-t, u-x, y-z

// Task 1: every thread adds its byte straight into the global histogram with atomicAdd.
void histogram_global(const unsigned char* d_in, std::size_t n, unsigned int* d_bins);

// Task 2: privatization. Each block counts into its own histogram in shared memory, then adds
// that private histogram into the global one (one atomicAdd per bin per block).
void histogram_shared(const unsigned char* d_in, std::size_t n, unsigned int* d_bins);

// Task 3: the PMPP text exercise. Letters a-z, upper or lower case, are counted in bins of four
// letters (bin = (letter - 'a') / 4, so 'y' and 'z' share the last bin); every other byte (digits,
// spaces, punctuation, bytes 128-255) is ignored. d_bins has kTextBins counters.
void histogram_text(const char* d_text, std::size_t n, unsigned int* d_bins);

// Task 4: coarsening and aggregation. Each thread reads many bytes with 16-byte (uint4) loads,
// counts into a per-warp histogram in shared memory, and merges runs of equal bytes in registers
// before it issues an atomicAdd.
void histogram_coarsened(const unsigned char* d_in, std::size_t n, unsigned int* d_bins);

// Challenge: as fast as you can make it, on uniform data and on data where every byte is equal.
// Timed against cub::DeviceHistogram::HistogramEven.
void histogram_fast(const unsigned char* d_in, std::size_t n, unsigned int* d_bins);
