// ADVERSARIAL CASE (grader/tests/adversarial): pastes in the reference solution with a digraph include (%:include),
// which a search for "#include" does not see. The whole file is these lines.
%:include "../../solutions/06-reduce/reduce.cu"
