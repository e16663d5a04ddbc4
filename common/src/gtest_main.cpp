// The main() of every lab test binary: GoogleTest plus the CUDA environment (GPU facts, skip reason).
#include <gtest/gtest.h>

#include <cudalab/gtest_cuda.hpp>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new cudalab::CudaEnvironment);  // gtest takes ownership
  return RUN_ALL_TESTS();
}
