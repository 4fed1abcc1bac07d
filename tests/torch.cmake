# Every op's forward and backward against PyTorch (tests/test_ops_torch.c).
#
# torch_ref_generate runs tests/torch_ref.py with Debian's python3-torch to write the reference
# file; it is a CTest fixture that test_ops_torch requires, so `ctest -R torch` runs both, in
# order. Without python3 or torch the generator fails and so does the test: nothing is skipped.
if(EXISTS /usr/bin/python3)
  set(NABLA_TORCH_PYTHON /usr/bin/python3 CACHE FILEPATH "Python with torch for the PyTorch reference tests")
else()
  find_program(NABLA_TORCH_PYTHON NAMES python3)
endif()

set(NABLA_TORCH_REF ${CMAKE_CURRENT_BINARY_DIR}/torch_ref.txt)

if(NABLA_TORCH_PYTHON)
  add_test(NAME torch_ref_generate
    COMMAND ${NABLA_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/torch_ref.py ${NABLA_TORCH_REF})
else()
  # no interpreter at all: the generator is a test that fails, naming what is missing
  message(WARNING "python3 not found: torch_ref_generate and test_ops_torch will fail (apt-get install python3-torch)")
  add_test(NAME torch_ref_generate COMMAND ${CMAKE_COMMAND} -E false)
endif()
set_tests_properties(torch_ref_generate PROPERTIES FIXTURES_SETUP torch_ref TIMEOUT 120)

add_executable(test_ops_torch test_ops_torch.c)
target_include_directories(test_ops_torch PRIVATE ${CMOCKA_INCLUDE_DIR})
target_include_directories(test_ops_torch PRIVATE ${CMAKE_SOURCE_DIR}/include)
target_link_libraries(test_ops_torch PRIVATE nabla_static ${CMOCKA_LIBRARY} m)
add_test(NAME test_ops_torch COMMAND test_ops_torch ${NABLA_TORCH_REF})
set_tests_properties(test_ops_torch PROPERTIES FIXTURES_REQUIRED torch_ref TIMEOUT 120
  FIXTURES_SETUP torch_coverage ENVIRONMENT "NABLA_OP_COVERAGE=${CMAKE_CURRENT_BINARY_DIR}/op_coverage_ops.txt")

# nb_autograd_grad and double backward (tests/test_double_backward.c): the contract and a
# gradgradcheck by finite differences run in C; the WGAN-GP step's gradients are written for
# tests/double_backward_check.py to compare with torch's.
add_executable(test_double_backward test_double_backward.c)
target_include_directories(test_double_backward PRIVATE ${CMOCKA_INCLUDE_DIR} ${CMAKE_SOURCE_DIR}/include)
target_link_libraries(test_double_backward PRIVATE nabla_static ${CMOCKA_LIBRARY} m)
add_test(NAME test_double_backward COMMAND sh -c "${NABLA_RUN} $<TARGET_FILE:test_double_backward> ${CMAKE_CURRENT_BINARY_DIR}/double_backward.txt && ${NABLA_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/double_backward_check.py ${CMAKE_CURRENT_BINARY_DIR}/double_backward.txt")
set_tests_properties(test_double_backward PROPERTIES TIMEOUT 120)
