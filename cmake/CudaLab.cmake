# cudalab_add_lab(<topic> [LIBS <targets>...] [RDC])
#
# Registers one lab from its directory (labs/NN-slug/). Expects, beside the calling CMakeLists.txt:
#   <topic>.cuh        the contract the tests call
#   <topic>.cu         the student's file (taken from CUDALAB_SUBMISSION_DIR when it has one)
#   test_<topic>.cu    GoogleTest checks, compiled once and linked into every binary below (a submission's
#                      build links the pristine build's objects: CUDALAB_TEST_OBJECTS_FROM, below)
# and builds
#   labNN_student_object     the student's file, compiled alone (the grader checks this object)
#   labNN_student_code       that object as a shared library that exports only the contract
#   labNN_student            tests + labNN_student_code
#   labNN_solution[_object|_code]  the same for solutions/NN-slug/<topic>.cu     (when it exists)
#   labNN_solution           in a student release: the tests + reference/NN-slug/liblabNN_solution_code.so
#   labNN_hidden_student     solutions/NN-slug/test_hidden_<topic>.cu + labNN_student_code (when it exists)
#   labNN_hidden_solution    the hidden tests against the reference
# LIBS are linked into the test binaries only (e.g. CUDA::cublas for a library baseline in the tests):
# the student's code links against the CUDA runtime and the C/C++ runtime, nothing else.
# RDC turns on relocatable device code for the lab file (dynamic parallelism): its code library is
# device-linked on its own. The tests launch nothing from the device, so they compile without it, and a
# submission's build links the pristine build's test objects in an RDC lab too.
#
# Why a shared library: the student's code is linked with a version script that keeps every symbol
# local except global-namespace C++ functions (the contract), and with -z defs. Whatever the file
# defines (fwrite, operator new, a GoogleTest or CUDA runtime function, a template the tests also
# instantiate) can then only ever be called by the file itself: the linker, not a pattern, keeps it
# from replacing anything in the tests, GoogleTest, the CUDA runtime or libc.
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

  set(test_libs cudalab::common GTest::gtest CUDA::cudart ${ARG_LIBS})

  # The test translation unit compiles once and links into both binaries (or, in a build that reuses
  # another build's test objects, links those: tests is the target to link).
  _cudalab_test_objects(${lab}_tests "${CMAKE_CURRENT_SOURCE_DIR}/test_${topic}.cu" "${test_libs}" tests)
  _cudalab_student_code(${lab}_student "${student_src}" ${ARG_RDC})
  _cudalab_test_binary(${lab}_student ${tests} ${lab}_student_code "${test_libs}")
  if(CUDALAB_BUILD_SOLUTIONS AND EXISTS "${solution_src}")
    _cudalab_student_code(${lab}_solution "${solution_src}" ${ARG_RDC})
    _cudalab_test_binary(${lab}_solution ${tests} ${lab}_solution_code "${test_libs}")
  endif()
  # A student release ships the reference compiled (reference/NN-slug/, grader/authoring/release_reference.py):
  # machine code for the release's GPUs, no source, no PTX. Its tests link against it like the student's
  # code, so a student copy times the reference in the same run as the student's kernels.
  set(compiled_reference "${PROJECT_SOURCE_DIR}/reference/${lab_dir}/lib${lab}_solution_code.so")
  if(CUDALAB_BUILD_SOLUTIONS AND NOT EXISTS "${solution_src}" AND EXISTS "${compiled_reference}")
    add_library(${lab}_solution_code SHARED IMPORTED)
    set_target_properties(${lab}_solution_code PROPERTIES IMPORTED_LOCATION "${compiled_reference}")
    _cudalab_test_binary(${lab}_solution ${tests} ${lab}_solution_code "${test_libs}")
  endif()
  if(CUDALAB_BUILD_SOLUTIONS AND EXISTS "${hidden_test_src}")
    _cudalab_test_objects(${lab}_hidden_tests "${hidden_test_src}" "${test_libs}" hidden_tests)
    _cudalab_test_binary(${lab}_hidden_student ${hidden_tests} ${lab}_student_code "${test_libs}")
    if(EXISTS "${solution_src}")
      _cudalab_test_binary(${lab}_hidden_solution ${hidden_tests} ${lab}_solution_code "${test_libs}")
    endif()
  endif()
endfunction()

# A test translation unit as an object library <name>. Compiling one takes 20-70 s, a lab file 3-10 s, so
# a build of a submission (CUDALAB_TEST_OBJECTS_FROM: the pristine build of this same tree) links the
# pristine build's objects instead, when they were compiled from the same file with the same compilers,
# architectures and flags: each build writes test-objects/<name>.cmake, which lists its objects and that
# fingerprint. Test objects never hold relocatable device code, so every lab's can be reused.
# out_var: the target to link (<name>, or <name>_reused, which is imported; <name> is then a no-op
# target, so that `cmake --build --target <name>` works in either build).
function(_cudalab_test_objects name source libs out_var)
  string(TOUPPER "${CMAKE_BUILD_TYPE}" config)
  string(JOIN "|" fingerprint "${source}" "${CMAKE_CUDA_COMPILER}" "${CMAKE_CUDA_COMPILER_VERSION}"
         "${CMAKE_CXX_COMPILER}" "${CMAKE_CXX_COMPILER_VERSION}" "${CMAKE_CUDA_ARCHITECTURES}" "${config}"
         "${CMAKE_CUDA_FLAGS}" "${CMAKE_CUDA_FLAGS_${config}}" "${CMAKE_CXX_FLAGS}" "${CMAKE_CXX_FLAGS_${config}}"
         "${CUDALAB_SYNC_CHECKS}" "${CUDALAB_LINEINFO}")
  if(CUDALAB_TEST_OBJECTS_FROM)
    set(manifest "${CUDALAB_TEST_OBJECTS_FROM}/test-objects/${name}.cmake")
    unset(reused_objects)
    unset(reused_fingerprint)
    if(EXISTS "${manifest}")
      include("${manifest}")
    endif()
    if(reused_objects AND reused_fingerprint STREQUAL fingerprint)
      add_library(${name}_reused OBJECT IMPORTED)
      set_target_properties(${name}_reused PROPERTIES IMPORTED_OBJECTS "${reused_objects}")
      add_custom_target(${name})
      set(${out_var} ${name}_reused PARENT_SCOPE)
      return()
    endif()
    message(STATUS "${name}: compiled in this build (no matching test objects in ${CUDALAB_TEST_OBJECTS_FROM})")
  endif()
  add_library(${name} OBJECT "${source}")
  target_include_directories(${name} PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
  target_link_libraries(${name} PRIVATE ${libs})
  file(GENERATE OUTPUT "${CMAKE_BINARY_DIR}/test-objects/${name}.cmake" CONTENT
       "set(reused_objects [==[$<TARGET_OBJECTS:${name}>]==])\nset(reused_fingerprint [==[${fingerprint}]==])\n")
  set(${out_var} ${name} PARENT_SCOPE)
endfunction()

# <prefix>_object: the file compiled on its own; <prefix>_code: the shared library made of it.
function(_cudalab_student_code prefix source rdc)
  add_library(${prefix}_object OBJECT "${source}")
  # The student's file includes its contract header from the pristine lab directory only.
  target_include_directories(${prefix}_object PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
  target_link_libraries(${prefix}_object PRIVATE cudalab::common)
  # nvcc keeps what it made on the way (<topic>.ptx for the technique checks) and the host compiler its
  # assembly (<file>.s, where host inline assembly shows): the grader reads both beside the object.
  set(keep_dir "${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/${prefix}_object.dir")
  target_compile_options(${prefix}_object PRIVATE
    "$<$<COMPILE_LANGUAGE:CUDA>:--keep;--keep-dir=${keep_dir};-Xcompiler=-save-temps=obj>")
  # CUB and Thrust annotate their calls for profilers with NVTX, whose header-only code finds its
  # library with dlopen and getenv: off in a lab file, whose object may not use either.
  target_compile_definitions(${prefix}_object PRIVATE CCCL_DISABLE_NVTX NVTX_DISABLE)
  set_target_properties(${prefix}_object PROPERTIES POSITION_INDEPENDENT_CODE ON)
  _cudalab_device_code(${prefix}_object ${rdc})

  add_library(${prefix}_code SHARED)
  target_link_libraries(${prefix}_code PRIVATE ${prefix}_object CUDA::cudart)
  target_link_options(${prefix}_code PRIVATE
    "LINKER:--version-script=${PROJECT_SOURCE_DIR}/cmake/student-code.map"
    "LINKER:-z,defs" "LINKER:-z,relro,-z,now")
  set_target_properties(${prefix}_code PROPERTIES
    LINKER_LANGUAGE CXX
    LIBRARY_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/lib")
  if(rdc)
    # Kernels launched from device code live in this library: it is device-linked on its own.
    set_target_properties(${prefix}_code PROPERTIES CUDA_SEPARABLE_COMPILATION ON CUDA_RESOLVE_DEVICE_SYMBOLS ON)
  endif()
endfunction()

function(_cudalab_test_binary name objects code libs)
  add_executable(${name})
  target_link_libraries(${name} PRIVATE ${objects} ${code} cudalab::gtest_main ${libs})
  # Full RELRO: the GOT is read-only once the program starts, so no code in the process can redirect
  # the calls the tests and the timers make.
  target_link_options(${name} PRIVATE "LINKER:-z,relro,-z,now")
  set_target_properties(${name} PROPERTIES LINKER_LANGUAGE CXX RUNTIME_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/bin")
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
