// ADVERSARIAL CASE (grader/tests/adversarial): pastes in the reference solution through an #include of a macro
// that builds the path, so the word "solutions" never appears in the file. The whole file is these lines.
#define LAB_GLUE(a, b) a##b
#define LAB_QUOTE2(x) #x
#define LAB_QUOTE(x) LAB_QUOTE2(x)
#define LAB_REFERENCE(lab, file) LAB_QUOTE(../../LAB_GLUE(solu, tions)/lab/file)
#include LAB_REFERENCE(07-scan, scan.cu)
