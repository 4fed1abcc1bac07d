# nabla doctor (src/model/doctor.c, tools/cli_doctor.c): tests/doctor_runs.c trains runs made to
# fail on purpose (and a healthy control) on synthetic data; tests/doctor_suite.py diagnoses them,
# checks each case's expected finding and prints precision and recall, then feeds hostile logs
# (truncated, corrupt, empty, NaN everywhere, 60,000 tags). doctor_pytorch diagnoses a log written
# by torch.utils.tensorboard and is skipped (77) where that does not import.
add_executable(doctor_runs doctor_runs.c)
target_link_libraries(doctor_runs PRIVATE nabla m)
add_test(NAME doctor_suite COMMAND ${NABLA_SUMMARY_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/doctor_suite.py
  $<TARGET_FILE:nabla-cli> $<TARGET_FILE:doctor_runs> ${CMAKE_CURRENT_BINARY_DIR}/doctor_work)
set_tests_properties(doctor_suite PROPERTIES TIMEOUT 180)
add_test(NAME doctor_pytorch COMMAND ${NABLA_SUMMARY_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/doctor_suite.py
  $<TARGET_FILE:nabla-cli> $<TARGET_FILE:doctor_runs> ${CMAKE_CURRENT_BINARY_DIR}/doctor_work pytorch)
set_tests_properties(doctor_pytorch PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77)
