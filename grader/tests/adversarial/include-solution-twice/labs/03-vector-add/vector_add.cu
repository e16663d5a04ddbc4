// ADVERSARIAL CASE (grader/tests/adversarial): includes the reference solution twice, so that its compile
// fails with errors that quote the reference's lines. The whole file is these two lines.
#include "../../solutions/03-vector-add/vector_add.cu"
#include "../../solutions/03-vector-add/vector_add.cu"
