# cudalab_add_lab(<topic> [LIBS <targets>...] [RDC])
#
# Registers one lab from its directory (labs/NN-slug/). Expects, beside the calling CMakeLists.txt:
#   <topic>.cuh        the contract the tests call
#   <topic>.cu         the student's file (taken from CUDALAB_SUBMISSION_DIR when it has one)
#   test_<topic>.cu    GoogleTest checks, compiled once and linked into every binary below
# and builds
#   labNN_student            tests + the student's file
#   labNN_solution           tests + solutions/NN-slug/<topic>.cu            (when it exists)
#   labNN_hidden_student     solutions/NN-slug/test_hidden_<topic>.cu + the student's file (when it exists)
#   labNN_hidden_solution    the hidden tests against the reference
# LIBS are linked into every binary (e.g. CUDA::cublas for a library baseline in the tests).
# RDC turns on relocatable device code and links the device runtime (dynamic parallelism).
function(cudalab_add_lab topic)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "RDC" "" "LIBS")
  get_filename_component(lab_dir "${CMAKE_CURRENT_SOURCE_DIR}" NAME)
  string(SUBSTRING "${lab_dir}" 0 2 lab_number)
  set(lab "lab${lab_number}")

  set(student_src "${CMAKE_CURRENT_SOURCE_DIR}/${topic}.cu")
  if(CUDALAB_SUBMISSION_DIR)
    set(submitted "${CUDALAB_SUBMISSION_DIR}/labs/${lab_dir}/${topic}.cu")
    if(EXISTS "${submitted}")
      set(student_src "${submitted}")
    endif()
  endif()
  set(solution_dir "${PROJECT_SOURCE_DIR}/solutions/${lab_dir}")
  set(solution_src "${solution_dir}/${topic}.cu")
  set(hidden_test_src "${solution_dir}/test_hidden_${topic}.cu")

  # With RDC, CMake links the device runtime (cudadevrt) itself for separable compilation.
  set(libs cudalab::common GTest::gtest CUDA::cudart ${ARG_LIBS})

  # The test translation unit compiles once and links into both binaries.
  _cudalab_object_library(${lab}_tests "${CMAKE_CURRENT_SOURCE_DIR}/test_${topic}.cu" "${libs}" ${ARG_RDC})
  _cudalab_test_binary(${lab}_student ${lab}_tests "${student_src}" "${libs}" ${ARG_RDC})
  if(CUDALAB_BUILD_SOLUTIONS AND EXISTS "${solution_src}")
    _cudalab_test_binary(${lab}_solution ${lab}_tests "${solution_src}" "${libs}" ${ARG_RDC})
  endif()
  if(CUDALAB_BUILD_SOLUTIONS AND EXISTS "${hidden_test_src}")
    _cudalab_object_library(${lab}_hidden_tests "${hidden_test_src}" "${libs}" ${ARG_RDC})
    _cudalab_test_binary(${lab}_hidden_student ${lab}_hidden_tests "${student_src}" "${libs}" ${ARG_RDC})
    if(EXISTS "${solution_src}")
      _cudalab_test_binary(${lab}_hidden_solution ${lab}_hidden_tests "${solution_src}" "${libs}" ${ARG_RDC})
    endif()
  endif()
endfunction()

function(_cudalab_object_library name source libs rdc)
  add_library(${name} OBJECT "${source}")
  target_include_directories(${name} PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
  target_link_libraries(${name} PRIVATE ${libs})
  _cudalab_device_code(${name} ${rdc})
endfunction()

function(_cudalab_test_binary name objects source libs rdc)
  add_executable(${name} "${source}")
  # The student's file includes its contract header from the pristine lab directory only.
  target_include_directories(${name} PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
  target_link_libraries(${name} PRIVATE ${objects} cudalab::gtest_main ${libs})
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/bin")
  _cudalab_device_code(${name} ${rdc})
  # One label per binary, its target name (lab03_solution): GoogleTest's PRE_TEST discovery cannot
  # carry a list of labels, and ctest -L takes a regex, so `-L lab03` and `-L solution` both select it.
  gtest_discover_tests(${name}
    DISCOVERY_MODE PRE_TEST
    TEST_PREFIX "${name}."
    PROPERTIES LABELS "${name}")
endfunction()

function(_cudalab_device_code name rdc)
  if(rdc)
    set_target_properties(${name} PROPERTIES CUDA_SEPARABLE_COMPILATION ON)
  endif()
endfunction()
