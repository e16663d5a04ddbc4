// The submission's own copy of the lab's tests, edited so that everything passes.
// The grader must ignore it: tests come from the pristine repository only.
#include <gtest/gtest.h>

TEST(VectorAddCorrectness, Everything) { SUCCEED(); }
