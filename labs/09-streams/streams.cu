// Lab 09: streams. Copy in, compute, copy out: first one after the other, then overlapped in a
// pipeline of chunks, with events between streams and a host callback per chunk.
#include "streams.cuh"

#include <cuda_runtime.h>

#include <vector>

#include <cudalab/check.cuh>

// ---------------------------------------------------------------------------------------------
// Task 1: serial. Three whole-array steps, each waiting for the one before: while the kernel runs,
// both copy engines are idle, and while a copy runs, every SM is.
// ---------------------------------------------------------------------------------------------

void run_serial(const float* h_in, float* h_out, float* d_in, float* d_out, std::size_t n, int iters) {
  if (n == 0) return;
  // TODO(student): cudaMemcpy the input to d_in, launch_work(d_in, d_out, n, iters, 0) on the
  //                default stream, cudaMemcpy d_out back to h_out (about 4 lines).
}

// ---------------------------------------------------------------------------------------------
// Task 2: the pipeline's streams. cudaStreamNonBlocking: work in them never waits for, and never
// holds up, the legacy default stream (stream 0), which otherwise synchronizes with every stream.
// ---------------------------------------------------------------------------------------------

std::vector<cudaStream_t> create_streams(int count) {
  std::vector<cudaStream_t> streams;
  // TODO(student): create `count` streams with cudaStreamCreateWithFlags, ones that stay independent
  //                of stream 0, and return all of them: the vector ends up `count` long (about 2 lines).
  return streams;
}

void destroy_streams(const std::vector<cudaStream_t>& streams) {
  // TODO(student): destroy each stream (1 line).
}

// ---------------------------------------------------------------------------------------------
// Task 3: the pipeline. Each chunk's three steps go, in order, into one stream; chunks go round-robin
// over the streams. While chunk c computes, chunk c + 1 is copied in and chunk c - 1 copied out:
// copies in each direction run on copy engines of their own, at the same time as kernels.
// Task 6 (the trace, 5 points): four events per chunk bracket its three steps.
// ---------------------------------------------------------------------------------------------

void run_pipelined(const float* h_in, float* h_out, float* d_in, float* d_out, std::size_t n, int iters,
                   int num_chunks, const std::vector<cudaStream_t>& streams, const cudaEvent_t* trace) {
  if (n == 0) return;
  // TODO(student): (about 16 lines)
  //   - split the n elements into num_chunks chunks with chunk_begin (num_chunks need not divide n)
  //     and deal them out round-robin over the given streams (there may be more chunks than streams);
  //   - each chunk is copied in, computed (launch_work) and copied back in its own stream, with
  //     cudaMemcpyAsync, and every pointer offset to where the chunk starts;
  //   - (task 6) if trace is not null, record chunk c's trace[4c] to trace[4c + 3] in its own stream,
  //     marking: before its H2D copy, after it, after its kernel, after its D2H copy;
  //   - enqueue everything first, then return only once every stream is done. Nothing may touch
  //     stream 0 (a call without a stream, a plain cudaMemcpy, cudaDeviceSynchronize).
}

// ---------------------------------------------------------------------------------------------
// Task 4: one stream per stage. Within a stream, order comes for free; between streams, an event is
// the only link: cudaEventRecord marks a point in one stream, cudaStreamWaitEvent makes another stream
// wait for it (on the GPU: the host does not block).
// ---------------------------------------------------------------------------------------------

void run_three_stage(const float* h_in, float* h_out, float* d_in, float* d_out, std::size_t n, int iters,
                     int num_chunks, cudaStream_t s_h2d, cudaStream_t s_compute, cudaStream_t s_d2h) {
  if (n == 0) return;
  // TODO(student): (about 22 lines)
  //   - chunks as in task 3, but one stream per stage: every H2D copy on s_h2d, every kernel on
  //     s_compute, every D2H copy on s_d2h;
  //   - chunk c's kernel may not start before chunk c's input is on the device, nor its D2H copy
  //     before its kernel is done, and the host must not block in between: order the streams with
  //     events (cudaEventDisableTiming: they only order); a wait sees only records made before it;
  //   - return only when the last copy is done, and destroy every event you create.
}

// ---------------------------------------------------------------------------------------------
// Task 5: a host callback per chunk. cudaLaunchHostFunc enqueues a host function into a stream: it
// runs (on a thread of the CUDA runtime) once all the work before it in that stream is done, and
// the stream's later work waits for it. It takes one void*, so each chunk needs its own arguments,
// kept alive until the callback has run.
// ---------------------------------------------------------------------------------------------

struct ChunkDoneArgs {
  ChunkDone on_done;
  void* user;
  int chunk;
};

// The function handed to cudaLaunchHostFunc: unpacks one chunk's arguments.
static void CUDART_CB chunk_done_trampoline(void* args) {
  // TODO(student): call the user's on_done with this chunk's index and user pointer (about 2 lines).
}

void run_pipelined_with_callback(const float* h_in, float* h_out, float* d_in, float* d_out, std::size_t n,
                                 int iters, int num_chunks, const std::vector<cudaStream_t>& streams,
                                 ChunkDone on_done, void* user) {
  if (n == 0) return;
  std::vector<ChunkDoneArgs> args(num_chunks);  // must outlive the callbacks: we wait below
  // TODO(student): the pipeline of task 3 (without the trace), plus one host callback per chunk
  //                (cudaLaunchHostFunc, chunk_done_trampoline) that runs only once that chunk is in
  //                h_out. Each callback needs arguments of its own, untouched until it has run (args
  //                is there for that). Then wait for every stream (about 16 lines).
}
