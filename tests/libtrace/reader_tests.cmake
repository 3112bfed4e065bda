# Reader suites: TraceReader on good files (test_reader), on damaged and
# foreign ones (test_reader_faults), the info summary, the Chrome exporter
# and the kinds of format 1.1 through all three (test_reader_pipeline).
# Inputs come from trace_builder.hpp, never from the recorder.
foreach(t test_reader test_reader_faults test_reader_summary test_reader_chrome
    test_reader_pipeline test_terminal_text)
  stallscope_add_test(${t} SOURCES ${CMAKE_CURRENT_LIST_DIR}/${t}.cpp
    LIBS stallscope::reader ZLIB::ZLIB nlohmann_json::nlohmann_json
    LABELS unit TIMEOUT 60)
endforeach()
set_tests_properties(test_reader_faults PROPERTIES LABELS "unit;fault")
