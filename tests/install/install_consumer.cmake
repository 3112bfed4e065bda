# Run by ctest (see CMakeLists.txt here), with -D BUILD_DIR, CONFIG,
# CONSUMER_SRC, WORK_DIR, GENERATOR, MAKE_PROGRAM, CXX_COMPILER, SANITIZE.
# 1. cmake --install BUILD_DIR into WORK_DIR/prefix
# 2. configure and build the consumer against that prefix only
# 3. run it with STALLSCOPE_OUT=WORK_DIR/run; it must exit 0 and leave a *.sst
cmake_minimum_required(VERSION 3.25)

foreach(var BUILD_DIR CONSUMER_SRC WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT ${var})
    message(FATAL_ERROR "install test: -D${var}=... is required")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/build)
set(run_dir ${WORK_DIR}/run)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# Runs one step; on failure prints its output and stops the test.
function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(JOIN " " cmd ${ARGN})
    message(FATAL_ERROR "install test: ${what} failed (exit ${rc})\n  ${cmd}\n${out}")
  endif()
  message(STATUS "install test: ${what}: ok")
endfunction()

# Settings of the caller's shell must not change what is tested.
unset(ENV{DESTDIR})
execute_process(COMMAND ${CMAKE_COMMAND} -E environment OUTPUT_VARIABLE environment)
string(REGEX MATCHALL "(^|\n)STALLSCOPE_[A-Za-z0-9_]*=" inherited "${environment}")
foreach(entry IN LISTS inherited)
  string(REGEX REPLACE "^\n?(.*)=$" "\\1" name "${entry}")
  unset(ENV{${name}})
endforeach()

set(config_arg)
if(CONFIG)
  set(config_arg --config ${CONFIG})
endif()
run_step("install into ${prefix}" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} ${config_arg})

set(configure_args -S ${CONSUMER_SRC} -B ${consumer_build} -G ${GENERATOR}
  -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
  -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF)
if(MAKE_PROGRAM)
  list(APPEND configure_args -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
if(CONFIG)
  list(APPEND configure_args -DCMAKE_BUILD_TYPE=${CONFIG})
endif()
if(SANITIZE)
  # A sanitized library needs the sanitizer runtime in the program too.
  list(APPEND configure_args "-DCMAKE_CXX_FLAGS=-fsanitize=${SANITIZE}"
                             "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZE}")
endif()
run_step("configure the consumer" ${CMAKE_COMMAND} ${configure_args})

# The package must come from the prefix, not from this build tree or the system.
file(STRINGS ${consumer_build}/CMakeCache.txt found_dir REGEX "^stallscope_DIR:")
string(REGEX REPLACE "^[^=]*=" "" found_dir "${found_dir}")
cmake_path(IS_PREFIX prefix "${found_dir}" NORMALIZE from_prefix)
if(NOT from_prefix)
  message(FATAL_ERROR "install test: stallscope found at '${found_dir}', not under ${prefix}")
endif()

run_step("build the consumer" ${CMAKE_COMMAND} --build ${consumer_build} ${config_arg})

find_program(consumer_exe consumer PATHS ${consumer_build} ${consumer_build}/${CONFIG}
             NO_DEFAULT_PATH REQUIRED)
set(ENV{STALLSCOPE_OUT} ${run_dir})
run_step("run the consumer" ${consumer_exe})

file(GLOB_RECURSE traces ${run_dir}/*.sst)
if(NOT traces)
  file(GLOB_RECURSE written ${run_dir}/*)
  file(GLOB run_dirs LIST_DIRECTORIES true ${WORK_DIR}/run*)
  message(FATAL_ERROR "install test: no *.sst under ${run_dir}\n"
                      "  files there: ${written}\n  run directories: ${run_dirs}")
endif()
message(STATUS "install test: trace written: ${traces}")

# 4. the samples, as a user's program: samples/ configured on its own against
#    the prefix only (no tests/, no src/, no internal/ of this tree).
if(SAMPLES_SRC AND NOT SANITIZE)
  set(samples_args ${configure_args})
  list(REMOVE_AT samples_args 0 1 2 3)  # -S CONSUMER_SRC -B consumer_build
  set(samples_build ${WORK_DIR}/samples)
  if(CXX_LAUNCHER)
    list(APPEND samples_args -DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_LAUNCHER})
  endif()
  run_step("configure samples/ against the prefix" ${CMAKE_COMMAND} -S ${SAMPLES_SRC}
           -B ${samples_build} ${samples_args})
  run_step("build samples/" ${CMAKE_COMMAND} --build ${samples_build} ${config_arg})
endif()
