# redwood_add_library(NAME FOLDER [DEPS ...]): one static library per folder, built from every
# source file under it (new files need no CMake edit), aliased as redwood::NAME.
function(redwood_add_library name)
  cmake_parse_arguments(ARG "" "" "DEPS;PRIVATE_DEPS;GLOBS" ${ARGN})
  if(NOT ARG_GLOBS)
    set(ARG_GLOBS *.cpp)
  endif()
  set(patterns)
  foreach(g IN LISTS ARG_GLOBS)
    list(APPEND patterns ${CMAKE_CURRENT_SOURCE_DIR}/${g})
  endforeach()
  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${patterns})
  add_library(redwood_${name} STATIC ${sources})
  add_library(redwood::${name} ALIAS redwood_${name})
  redwood_include_directories(redwood_${name})
  target_link_libraries(redwood_${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  redwood_set_warnings(redwood_${name})
endfunction()

# The project's root (headers are included as "core/tensor.hpp") and the generated
# redwood/config.hpp, in the build; an installed package's targets get theirs from
# cmake/RedwoodInstall.cmake.
function(redwood_include_directories target)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
                                              $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/include>)
endfunction()

function(redwood_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
  if(REDWOOD_SANITIZE)
    # Every finding fails its test: UBSan would otherwise print and carry on. Not the vptr check:
    # oneTBB's flow-graph header downcasts its own tasks to a type they are not
    # (oneapi/tbb/detail/_flow_graph_impl.h:368), which it reports in every pipeline.
    target_compile_options(${target} PUBLIC -fsanitize=${REDWOOD_SANITIZE} -fno-sanitize-recover=all
                                            -fno-sanitize=vptr -fno-omit-frame-pointer)
    target_link_options(${target} PUBLIC -fsanitize=${REDWOOD_SANITIZE})
    target_compile_definitions(${target} PUBLIC REDWOOD_SANITIZED=1)
  endif()
endfunction()

# Kernels and stages register themselves from static initializers at the bottom of their own
# files; a plain static link would drop those objects, so consumers take the whole archive.
function(redwood_link_registered target)
  foreach(lib IN LISTS ARGN)
    target_link_libraries(${target} PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,${lib}>")
  endforeach()
endfunction()
