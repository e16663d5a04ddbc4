// ADVERSARIAL CASE (grader/tests/adversarial): pastes in the reference solution with an #include split by line
// splices (backslash-newline), so neither "#include" nor "solutions" appears on one line. The whole file is these lines.
#inc\
lude "../../solu\
tions/08-histogram/histogram.cu"
