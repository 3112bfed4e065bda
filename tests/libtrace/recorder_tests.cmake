# Recorder suites: white-box (thread buffer, clock) and black-box through
# recorder_probe, a traced program whose files the tests read back.
add_executable(recorder_probe ${CMAKE_CURRENT_LIST_DIR}/recorder_probe.cpp)
target_link_libraries(recorder_probe PRIVATE stallscope::trace stallscope_warnings)

stallscope_add_test(test_thread_buffer
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_thread_buffer.cpp
          ${PROJECT_SOURCE_DIR}/libtrace/src/recorder/thread_buffer.cpp
  LIBS stallscope_internal
  LABELS unit)
target_include_directories(test_thread_buffer PRIVATE
  ${PROJECT_SOURCE_DIR}/libtrace/src ${PROJECT_SOURCE_DIR}/libtrace/include)

stallscope_add_test(test_clock
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_clock.cpp
          ${PROJECT_SOURCE_DIR}/libtrace/src/common/clock.cpp
  LABELS unit)
target_include_directories(test_clock PRIVATE
  ${PROJECT_SOURCE_DIR}/libtrace/src ${PROJECT_SOURCE_DIR}/libtrace/include)

foreach(t test_recorder test_recorder_faults test_recorder_pipeline)
  stallscope_add_test(${t} SOURCES ${CMAKE_CURRENT_LIST_DIR}/${t}.cpp
    LIBS stallscope::reader nlohmann_json::nlohmann_json LABELS integration TIMEOUT 400)
  add_dependencies(${t} recorder_probe)
endforeach()
set_tests_properties(test_recorder_faults PROPERTIES LABELS "integration;fault")
