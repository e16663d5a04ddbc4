// ADVERSARIAL CASE (grader/tests/adversarial): pastes the reference solution in with an #include that leaves the lab directory.
// The whole file is this one line.
#include "../../solutions/03-vector-add/vector_add.cu"
