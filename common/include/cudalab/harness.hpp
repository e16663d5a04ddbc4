// What the grader tells a test binary, read once by main() before any test (or any student code) runs,
// then wiped from the environment. Test code asks cudalab::harness::settings(); nothing reads the
// environment later, so code under test cannot switch a mode by changing it, and cannot read it.
//
//   CUDALAB_SMALL=1         small sizes only, perf tests off (the sanitizer stage)
//   CUDALAB_RUN_NONCE=<hex> echoed in the report as run_nonce: the grader believes a report only when
//                           it carries the nonce of the run it started
// The harness also records whether compute-sanitizer is attached (the variables it launches us with), so
// the grader can check that the mode it asked for is the mode that ran.
#pragma once

#include <string>

namespace cudalab::harness {

struct Settings {
  bool small_mode = false;
  bool sanitizer_attached = false;
  std::string run_nonce;
};

// Defined in common/src/gtest_main.cpp; valid from the start of main().
const Settings& settings();

}  // namespace cudalab::harness
