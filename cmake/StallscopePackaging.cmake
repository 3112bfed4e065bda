# Packaging: the man page of the `stallscope` command and the Debian package
# (`cpack -G DEB` in a configured build directory; docs/install.md).
#
# The man page is `stallscope --help` as help2man writes it, built where
# help2man is installed (component `man`; the Debian package carries it).
find_program(STALLSCOPE_HELP2MAN help2man)
if(STALLSCOPE_HELP2MAN AND TARGET stallscope)
  set(stallscope_man ${PROJECT_BINARY_DIR}/man/stallscope.1)
  add_custom_command(OUTPUT ${stallscope_man}.gz
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
    COMMAND ${STALLSCOPE_HELP2MAN} --no-info --version-string=${PROJECT_VERSION}
            --name=${PROJECT_DESCRIPTION} --output=${stallscope_man} $<TARGET_FILE:stallscope>
    COMMAND gzip -n -9 -f ${stallscope_man}
    DEPENDS stallscope
    COMMENT "help2man: stallscope.1"
    VERBATIM)
  add_custom_target(stallscope_man ALL DEPENDS ${stallscope_man}.gz)
  install(FILES ${stallscope_man}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT man)
endif()

# A wheel holds no symbolic links (each would be a second copy of its
# library): there the versioned libraries are one file each, named by
# their soname.
if(SKBUILD)
  foreach(lib stallscope_trace stallscope_reader stallscope_loader)
    if(TARGET ${lib})
      get_target_property(soversion ${lib} SOVERSION)
      set_target_properties(${lib} PROPERTIES VERSION ${soversion})
    endif()
  endforeach()
endif()

# One package, `stallscope`, with every component: the command, the
# libraries, the preload shim, the CUDA library where built, the Python
# hooks, the headers and CMake config, the docs and the man page, under
# /usr. Its Depends are computed by dpkg-shlibdeps from what the binaries
# link (dpkg-dev).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME stallscope)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY ${PROJECT_DESCRIPTION})
set(CPACK_PACKAGE_DESCRIPTION
  "Records what a training process does (storage reads, preprocessing, copies, GPU kernels, \
collectives), attributes every step's wall time to one cause and reports remedies with the \
gain each should bring. `stallscope run -- python train.py` attaches to a trainer as it is.")
set(CPACK_PACKAGE_CONTACT "stallscope maintainers <stallscope@users.noreply.github.com>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # stallscope_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)  # shlibs for libstallscope_*, and ldconfig
# The Python hooks run in the trainer's own interpreter.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS python3)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
