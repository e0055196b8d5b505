# install.cmake: `cmake --install build --prefix P` puts libbert8.so (versioned SONAME) and
# libbert8.a, the public headers, bert8.pc and the CMake package (find_package(bert8) ->
# bert8::bert8, bert8::bert8_static) under P. Components: Runtime (the shared library itself)
# and Development (everything else); pip's build installs only the `python` component.
include(CMakePackageConfigHelpers)
set(BERT8_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/bert8)

install(FILES include/bert8.h include/bert8_pipeline.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT Development)
install(TARGETS bert8 EXPORT bert8StaticTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development)
install(EXPORT bert8StaticTargets NAMESPACE bert8:: DESTINATION ${BERT8_CMAKE_DIR}
        COMPONENT Development)
if(BERT8_SHARED)
  install(TARGETS bert8_shared EXPORT bert8Targets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Runtime NAMELINK_COMPONENT Development)
  install(EXPORT bert8Targets NAMESPACE bert8:: DESTINATION ${BERT8_CMAKE_DIR} COMPONENT Development)
else()
  # find_package(bert8) still works; bert8::bert8 is then the static library.
  file(WRITE ${CMAKE_BINARY_DIR}/bert8Targets.cmake
       "if(NOT TARGET bert8::bert8)\n  add_library(bert8::bert8 INTERFACE IMPORTED)\n"
       "  set_target_properties(bert8::bert8 PROPERTIES INTERFACE_LINK_LIBRARIES bert8::bert8_static)\nendif()\n")
  install(FILES ${CMAKE_BINARY_DIR}/bert8Targets.cmake DESTINATION ${BERT8_CMAKE_DIR} COMPONENT Development)
endif()

configure_package_config_file(cmake/bert8Config.cmake.in ${CMAKE_BINARY_DIR}/bert8Config.cmake
                              INSTALL_DESTINATION ${BERT8_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/bert8ConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/bert8Config.cmake ${CMAKE_BINARY_DIR}/bert8ConfigVersion.cmake
        DESTINATION ${BERT8_CMAKE_DIR} COMPONENT Development)

set(BERT8_PC_OPENMP "${OpenMP_C_FLAGS}")
configure_file(cmake/bert8.pc.in ${CMAKE_BINARY_DIR}/bert8.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/bert8.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT Development)
