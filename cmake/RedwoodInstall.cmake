# `cmake --install BUILD [--prefix DIR]`: Redwood as a package an application finds with
# find_package(Redwood) (cmake/RedwoodConfig.cmake.in; apps/examples/custom_stage builds on it).
#
#   DIR/include/redwood/{core,memory,runtime,backends,stages,pipelines}/...   the headers
#   DIR/include/redwood/config.hpp                                            version, CUDA or not
#   DIR/lib/libredwood_*.a                                                    the libraries
#   DIR/lib/cmake/Redwood/                                                    config, version, targets
#   DIR/bin/redwood                                                           the launcher
#
# Headers are included as "core/tensor.hpp" (DIR/include/redwood on the include path) and the
# configuration as "redwood/config.hpp" (DIR/include).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(redwood_installed redwood_core redwood_memory redwood_runtime redwood_backend_cpu redwood_cuda_passes
    redwood_stage_objects redwood_stages redwood_pipelines)
if(REDWOOD_HAVE_CUDA)
  list(APPEND redwood_installed redwood_backend_cuda)
endif()
foreach(target IN LISTS redwood_installed)
  string(REGEX REPLACE "^redwood_" "" short ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${short})
endforeach()

# redwood::redwood: everything an application needs to run pipelines, with the libraries whose
# objects register themselves (kernels, the CUDA runner; stages come whole through
# redwood::stages) linked whole.
add_library(redwood_all INTERFACE)
add_library(redwood::redwood ALIAS redwood_all)
set_target_properties(redwood_all PROPERTIES EXPORT_NAME redwood)
target_link_libraries(redwood_all INTERFACE redwood::core redwood::memory redwood::runtime redwood::stages
                                            redwood::pipelines "$<LINK_LIBRARY:WHOLE_ARCHIVE,redwood::backend_cpu>")
if(REDWOOD_HAVE_CUDA)
  target_link_libraries(redwood_all INTERFACE "$<LINK_LIBRARY:WHOLE_ARCHIVE,redwood::backend_cuda>")
endif()

install(TARGETS ${redwood_installed} redwood_all EXPORT RedwoodTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/redwood ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS redwood RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(folder core memory runtime backends stages pipelines)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${folder} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/redwood
          FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h" PATTERN "*.cuh" PATTERN "bench" EXCLUDE)
endforeach()
install(FILES ${PROJECT_BINARY_DIR}/include/redwood/config.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/redwood)

set(redwood_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/Redwood)
install(EXPORT RedwoodTargets NAMESPACE redwood:: DESTINATION ${redwood_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/RedwoodConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/RedwoodConfig.cmake INSTALL_DESTINATION ${redwood_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/RedwoodConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/RedwoodConfig.cmake ${PROJECT_BINARY_DIR}/RedwoodConfigVersion.cmake
        DESTINATION ${redwood_cmake_dir})
