# stallscope_add_test(NAME SOURCES src... [LIBS lib...] [LABELS l...] [TIMEOUT s])
# One Boost.Test executable per test file, registered with ctest. A test that
# cannot run here (hardware, kernel feature) exits 77 and ctest shows SKIP;
# stallscope_add_case_tests gives one case an entry of its own.
#
# Every suite's files start with Boost.Test's header, precompiled once
# (parsing it was about a third of a test file's build time), so a test file
# defines no BOOST_TEST_MODULE: its main() is tests/test_main.cpp, linked
# from stallscope_test_main, unless it has its own (BOOST_TEST_NO_MAIN).

# The options a suite's files are built with; the precompiled header is built
# with the same ones, or the compiler would not use it.
function(stallscope_test_options target)
  target_link_libraries(${target} PRIVATE Boost::unit_test_framework stallscope_warnings)
  target_compile_definitions(${target} PRIVATE BOOST_TEST_DYN_LINK
    STALLSCOPE_TEST_BINARY_DIR="${CMAKE_BINARY_DIR}")
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  # Test code drives the libraries, which keep -O3; Boost.Test's templates
  # make most of a test file's build time, and -O1 cuts it by a third.
  if(CMAKE_BUILD_TYPE STREQUAL "Release")
    target_compile_options(${target} PRIVATE -O1)
  endif()
endfunction()

if(NOT TARGET stallscope_test_main)
  add_library(stallscope_test_main STATIC ${PROJECT_SOURCE_DIR}/tests/test_main.cpp)
  stallscope_test_options(stallscope_test_main)
  # Built as the executables' code is (-fPIE, not a library's -fPIC): the
  # compiler uses a precompiled header only with the same code model.
  set_target_properties(stallscope_test_main PROPERTIES POSITION_INDEPENDENT_CODE OFF)
  target_compile_options(stallscope_test_main PRIVATE ${CMAKE_CXX_COMPILE_OPTIONS_PIE})
  target_precompile_headers(stallscope_test_main PRIVATE <boost/test/unit_test.hpp>)
endif()

# stallscope_add_test(NAME SOURCES src... [LIBS l...] [LABELS l...] [TIMEOUT s]
#                     [CASES_ONLY])
# A Boost.Test executable and its ctest entry; with CASES_ONLY no entry of
# its own (every case disabled, each an entry of stallscope_add_case_tests).
function(stallscope_add_test name)
  cmake_parse_arguments(T "CASES_ONLY" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  stallscope_test_options(${name})
  target_link_libraries(${name} PRIVATE ${T_LIBS})
  target_precompile_headers(${name} REUSE_FROM stallscope_test_main)
  list(GET T_SOURCES 0 first)
  file(STRINGS ${first} own_main REGEX "^#define BOOST_TEST_NO_MAIN")
  if(NOT own_main)
    target_link_libraries(${name} PRIVATE stallscope_test_main)
  endif()
  if(T_CASES_ONLY)
    return()
  endif()
  add_test(NAME ${name} COMMAND ${name} --log_level=test_suite --report_level=short)
  stallscope_test_properties(${name} "${T_TIMEOUT}" "${T_LABELS}")
endfunction()

# The ctest properties of one entry: its timeout (default 120 s), exit 77
# shown as a skip, its labels, and the sanitizers' settings.
function(stallscope_test_properties test timeout labels)
  if(NOT timeout)
    set(timeout 120)
  endif()
  set_tests_properties(${test} PROPERTIES TIMEOUT ${timeout} SKIP_RETURN_CODE 77
    LABELS "${labels}")
  if(STALLSCOPE_SANITIZE)
    set_tests_properties(${test} PROPERTIES ENVIRONMENT
      "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/sanitizers/lsan.supp:print_suppressions=0;ASAN_OPTIONS=abort_on_error=0:detect_leaks=1;UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
  endif()
endfunction()

# stallscope_add_case_tests(EXE SUITE CASES case... [LABELS l...] [TIMEOUT s])
# Each CASE of EXE's test suite SUITE as a ctest entry EXE.CASE of its own,
# for a case that skips (exits 77) where its premise does not hold
# (tests/cpu_premise.hpp): alone in its process, the skip hides no other
# case. Such a case is disabled by default in its file
# (*boost::unit_test::disabled()), so EXE's own entry leaves it out.
function(stallscope_add_case_tests exe suite)
  cmake_parse_arguments(T "" "TIMEOUT" "CASES;LABELS" ${ARGN})
  foreach(case IN LISTS T_CASES)
    add_test(NAME ${exe}.${case}
      COMMAND ${exe} --run_test=${suite}/${case} --log_level=test_suite --report_level=short)
    stallscope_test_properties(${exe}.${case} "${T_TIMEOUT}" "${T_LABELS}")
  endforeach()
endfunction()
