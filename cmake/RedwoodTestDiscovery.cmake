# redwood_discover_tests(TARGET LABEL label [TIMEOUT s] [GPU]): a GoogleTest binary's cases as
# ctest entries, one per case, named as GoogleTest names them (cmake/RedwoodListTests.cmake lists
# them after each link). A skipped case (GTEST_SKIP) shows as skipped.
#
# GPU binaries are decided when ctest runs, by one probe of the machine:
#
#   a usable GPU  ─► one entry per case, each reporting by name
#   none          ─► one entry for the whole binary: the host-only cases run and must pass, every
#                    GPU case skips in that same process saying why (the probe's reason)
#
# A process of a GPU binary costs over half a second to start; starting one per case only to
# skip would cost most of a test run on a machine without a GPU. The binary answers the probe
# itself (`TARGET --redwood-gpu-probe`: exit 0 when a CUDA device is usable, else 1 and the
# reason; tests/backends/cuda/gpu_test_main.cpp), so the answer is the tests' own.
set(REDWOOD_LIST_TESTS_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/RedwoodListTests.cmake)

function(redwood_discover_tests target)
  cmake_parse_arguments(ARG "GPU" "LABEL;TIMEOUT" "" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 1500)
  endif()
  set(tests_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_cases.cmake")
  add_custom_command(TARGET ${target} POST_BUILD
    BYPRODUCTS "${tests_file}"
    COMMAND "${CMAKE_COMMAND}" -D "EXE=$<TARGET_FILE:${target}>" -D "OUT=${tests_file}" -D "LABEL=${ARG_LABEL}"
            -D "TIMEOUT=${ARG_TIMEOUT}" -D "DISCOVERY_TIMEOUT=120" -P "${REDWOOD_LIST_TESTS_SCRIPT}"
    VERBATIM)
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_include.cmake")
  if(NOT ARG_GPU)
    file(GENERATE OUTPUT "${include_file}" CONTENT
"if(EXISTS [==[${tests_file}]==])
  include([==[${tests_file}]==])
else()
  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)
endif()
")
  else()
    file(GENERATE OUTPUT "${include_file}" CONTENT
"# Per-case entries where a GPU is usable, else one (cmake/RedwoodGpuTests.cmake).
set(_rw_exe [==[$<TARGET_FILE:${target}>]==])
if(NOT EXISTS \"\${_rw_exe}\" OR NOT EXISTS [==[${tests_file}]==])
  add_test(${target}_NOT_BUILT ${target}_NOT_BUILT)
  return()
endif()
execute_process(COMMAND \"\${_rw_exe}\" --redwood-gpu-probe RESULT_VARIABLE _rw_rc
                OUTPUT_VARIABLE _rw_why ERROR_VARIABLE _rw_why TIMEOUT 120)
if(_rw_rc EQUAL 0)
  include([==[${tests_file}]==])
else()
  add_test(${target}.AllCasesWithoutGpu \"\${_rw_exe}\" --gtest_brief=1)
  set_tests_properties(${target}.AllCasesWithoutGpu PROPERTIES LABELS ${ARG_LABEL} TIMEOUT 600)
endif()
")
  endif()
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()
