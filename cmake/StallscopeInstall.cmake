# Exports stallscopeConfig.cmake so a user's project can
#   find_package(stallscope) ; target_link_libraries(app PRIVATE stallscope::trace)
include(CMakePackageConfigHelpers)
set(STALLSCOPE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/stallscope)
install(EXPORT stallscopeTargets NAMESPACE stallscope:: DESTINATION ${STALLSCOPE_CMAKE_DIR}
  COMPONENT development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/stallscopeConfig.cmake.in
  ${PROJECT_BINARY_DIR}/stallscopeConfig.cmake INSTALL_DESTINATION ${STALLSCOPE_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/stallscopeConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/stallscopeConfig.cmake
              ${PROJECT_BINARY_DIR}/stallscopeConfigVersion.cmake
        DESTINATION ${STALLSCOPE_CMAKE_DIR} COMPONENT development)
