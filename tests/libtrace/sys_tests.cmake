# System probes (internal/ and libtrace/src/sys): white-box suites linking
# them directly, without the recorder.
stallscope_add_test(test_run_identity
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_run_identity.cpp
  LIBS stallscope_internal
  LABELS unit)
stallscope_add_test(test_process_facts
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_process_facts.cpp
  LIBS stallscope_internal
  LABELS unit)
stallscope_add_test(test_cpu_sampler
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cpu_sampler.cpp
  LIBS stallscope_sys
  LABELS unit fault
  TIMEOUT 180)
stallscope_add_test(test_cpu_sampler_proc
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cpu_sampler_proc.cpp
  LIBS stallscope_sys
  LABELS unit fault
  TIMEOUT 120)
