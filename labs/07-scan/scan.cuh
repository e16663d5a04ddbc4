// Lab 07 contract: the functions the tests call. Do not edit; implement them in scan.cu.
//
// Every pointer is a device pointer from cudaMalloc (so 16-byte aligned: int4 loads are allowed at any
// multiple of 4 elements). Inputs and outputs never overlap. n is an element count and can exceed 2^28.
//   inclusive scan: out[i] = in[0] + in[1] + ... + in[i]
//   exclusive scan: out[i] = in[0] + ... + in[i-1], and out[0] = 0 (the identity of +)
#pragma once

#include <cstddef>

// Tasks 1-3 scan each tile of kBlockScanTile consecutive elements on its own, as if it were a separate
// array (one thread block per tile; the last tile may be partial). out[i] depends only on the elements
// of i's own tile.
constexpr int kBlockScanTile = 1024;

// Task 1: Hillis-Steele, inclusive, one element per thread, kBlockScanTile threads per block.
void block_scan_hillis_steele(const int* d_in, int* d_out, std::size_t n);

// Task 2: Blelloch (work-efficient up-sweep and down-sweep), exclusive, two elements per thread,
// kBlockScanTile / 2 threads per block, shared-memory indices padded against bank conflicts.
void block_scan_blelloch(const int* d_in, int* d_out, std::size_t n);

// Task 3: warp-shuffle scan (__shfl_up_sync inside each warp, then one warp scans the warp totals),
// inclusive, one element per thread, kBlockScanTile threads per block.
void block_scan_warp_shuffle(const int* d_in, int* d_out, std::size_t n);

// Task 4: the whole array, any n, by scan-then-propagate: scan every tile, scan the tile totals (the
// same way, recursively, since there can be more totals than one block scans), then add each tile's
// offset to its elements. d_temp holds at least scan_temp_bytes(n) bytes of scratch; its contents on
// entry are arbitrary.
std::size_t scan_temp_bytes(std::size_t n);
void exclusive_scan(const int* d_in, int* d_out, std::size_t n, void* d_temp);
void inclusive_scan(const int* d_in, int* d_out, std::size_t n, void* d_temp);

// Challenge: the same two scans in a single pass over the data, with decoupled look-back
// (Merrill & Garland, 2016). d_temp holds at least scan_decoupled_temp_bytes(n) bytes of scratch
// (tile status words and a tile counter); its contents on entry are arbitrary, and the functions are
// called many times in a row with the same d_temp.
std::size_t scan_decoupled_temp_bytes(std::size_t n);
void exclusive_scan_decoupled(const int* d_in, int* d_out, std::size_t n, void* d_temp);
void inclusive_scan_decoupled(const int* d_in, int* d_out, std::size_t n, void* d_temp);
