# What `cmake --install` puts in place for programs built against libtolk:
#   lib/libtolk.so.0.1.0 (SONAME libtolk.so.0.1) and libtolk.a
#   include/tolk.h
#   lib/pkgconfig/tolk.pc             pkg-config --cflags --libs tolk (--static adds cJSON)
#   lib/cmake/tolk/tolkConfig.cmake   find_package(tolk): tolk::tolk (shared), tolk::tolk_static
# Everything is relocatable: tolk.pc finds its prefix from its own place
# (${pcfiledir}) and the CMake package from its own, so `--prefix` at install
# time and DESTDIR both work. The service (tolk_serve.h, libmicrohttpd) is not
# installed as a library: it is the `tolk serve` program.
include(CMakePackageConfigHelpers)
set_target_properties(tolk_shared PROPERTIES EXPORT_NAME tolk)
set_target_properties(tolk_static PROPERTIES EXPORT_NAME tolk_static)
install(TARGETS tolk_shared tolk_static EXPORT tolkTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/tolk.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(TOLK_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tolk)
install(EXPORT tolkTargets NAMESPACE tolk:: DESTINATION ${TOLK_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tolkConfig.cmake.in
  ${CMAKE_BINARY_DIR}/generated/tolkConfig.cmake INSTALL_DESTINATION ${TOLK_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/generated/tolkConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/generated/tolkConfig.cmake
              ${CMAKE_BINARY_DIR}/generated/tolkConfigVersion.cmake DESTINATION ${TOLK_CMAKE_DIR})

# tolk.pc: the prefix relative to the file, so it can move with the tree.
file(RELATIVE_PATH TOLK_PC_UP /x/${CMAKE_INSTALL_LIBDIR}/pkgconfig /x)
string(REGEX REPLACE "/$" "" TOLK_PC_UP "${TOLK_PC_UP}")
if(TOLK_BUNDLED_CJSON)
  set(TOLK_PC_REQUIRES_PRIVATE "")
else()
  set(TOLK_PC_REQUIRES_PRIVATE "libcjson")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/tolk.pc.in ${CMAKE_BINARY_DIR}/generated/tolk.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/generated/tolk.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
