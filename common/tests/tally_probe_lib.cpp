// A shared library linked the way a lab's code library is (cmake/CudaLab.cmake): against the CUDA
// runtime, exporting only its C++ functions. The tally's self-tests call it to show that allocations
// made from such a library reach the test binary's counting functions.
#include <cuda_runtime_api.h>

#include <cstddef>

cudaError_t tally_probe_malloc(void** p, std::size_t bytes) { return cudaMalloc(p, bytes); }
cudaError_t tally_probe_free(void* p) { return cudaFree(p); }
cudaError_t tally_probe_malloc_host(void** p, std::size_t bytes) { return cudaMallocHost(p, bytes); }
cudaError_t tally_probe_free_host(void* p) { return cudaFreeHost(p); }
cudaError_t tally_probe_stream(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking); }
cudaError_t tally_probe_event(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDisableTiming); }
