# TensorBoard event files, run-health helpers and plots (src/summary).
#
# test_summary (cmocka) tests the writer, reader and plotter and writes two fixture runs;
# tb_reader_check decodes them with tests/tb_reader.py, an independent reader written from
# TensorBoard's public protos in Python's standard library; summary_plot runs nabla-plot on them
# and checks the SVG with xmllint and rsvg-convert (Debian: libxml2-utils, librsvg2-bin). The
# fixture ordering is by CTest fixtures, so `ctest -R summary` runs all three in order.
set(NABLA_SUMMARY_FIXTURE ${CMAKE_CURRENT_BINARY_DIR}/summary_fixture)

add_executable(test_summary test_summary.c)
target_include_directories(test_summary PRIVATE ${CMOCKA_INCLUDE_DIR})
# the static library, so the test also reaches the internal protobuf encoder and CRC
target_link_libraries(test_summary PRIVATE nabla_static ${CMOCKA_LIBRARY} m)
add_test(NAME test_summary COMMAND test_summary ${NABLA_SUMMARY_FIXTURE})
set_tests_properties(test_summary PROPERTIES FIXTURES_SETUP summary_fixture TIMEOUT 60)

if(EXISTS /usr/bin/python3)
  set(NABLA_SUMMARY_PYTHON /usr/bin/python3)
else()
  find_program(NABLA_SUMMARY_PYTHON NAMES python3)
endif()
if(NOT NABLA_SUMMARY_PYTHON)
  set(NABLA_SUMMARY_PYTHON python3) # fails at test time, naming what is missing
endif()
add_test(NAME tb_reader_check COMMAND ${NABLA_SUMMARY_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/tb_reader.py
  --check ${NABLA_SUMMARY_FIXTURE}/run_a ${NABLA_SUMMARY_FIXTURE}/run_a/expected.txt)
set_tests_properties(tb_reader_check PROPERTIES FIXTURES_REQUIRED summary_fixture TIMEOUT 60)

add_test(NAME summary_plot COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/summary_plot.sh
  $<TARGET_FILE:nabla-plot> ${NABLA_SUMMARY_FIXTURE})
set_tests_properties(summary_plot PROPERTIES FIXTURES_REQUIRED summary_fixture TIMEOUT 60)
