# stallscope_add_test(NAME SOURCES src... [LIBS lib...] [LABELS l...] [TIMEOUT s])
# One Boost.Test executable per test file, registered with ctest. A test that
# cannot run here (hardware, kernel feature) exits 77 and ctest shows SKIP.
function(stallscope_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE Boost::unit_test_framework stallscope_warnings ${T_LIBS})
  target_compile_definitions(${name} PRIVATE BOOST_TEST_DYN_LINK
    STALLSCOPE_TEST_BINARY_DIR="${CMAKE_BINARY_DIR}")
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  # Test code drives the libraries, which keep -O3; Boost.Test's templates
  # make most of a test file's build time, and -O1 cuts it by a third.
  if(CMAKE_BUILD_TYPE STREQUAL "Release")
    target_compile_options(${name} PRIVATE -O1)
  endif()
  add_test(NAME ${name} COMMAND ${name} --log_level=test_suite --report_level=short)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} SKIP_RETURN_CODE 77
    LABELS "${T_LABELS}")
  if(STALLSCOPE_SANITIZE)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT
      "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/sanitizers/lsan.supp:print_suppressions=0;ASAN_OPTIONS=abort_on_error=0:detect_leaks=1;UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
  endif()
endfunction()
