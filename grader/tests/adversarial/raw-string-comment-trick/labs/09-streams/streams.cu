// ADVERSARIAL CASE (grader/tests/adversarial): pastes in the reference solution with an #include that a naive
// comment stripper removes: it takes the "/*" inside the raw string below for the start of a comment that
// runs to the "*/" in the second one. The whole file is these lines.
[[maybe_unused]] static const char* const kBannerTop = R"(/*)";
#include "../../solutions/09-streams/streams.cu"
[[maybe_unused]] static const char* const kBannerBottom = R"(*/)";
