# Module base (tests/test_nn.c), and layers, losses, optimizers and schedules against PyTorch
# (tests/test_nn_torch.c).
#
# nn_ref_generate runs tests/nn_ref.py with Debian's python3-torch to write the reference file;
# it is a CTest fixture that test_nn_torch requires, so `ctest -R nn` runs both, in order.
# Without python3 or torch the generator fails and so does the test: nothing is skipped.
nabla_test(test_nn)

if(NOT NABLA_TORCH_PYTHON)
  if(EXISTS /usr/bin/python3)
    set(NABLA_TORCH_PYTHON /usr/bin/python3 CACHE FILEPATH "Python with torch for the PyTorch reference tests")
  else()
    find_program(NABLA_TORCH_PYTHON NAMES python3)
  endif()
endif()

set(NABLA_NN_REF ${CMAKE_CURRENT_BINARY_DIR}/nn_ref.txt)

if(NABLA_TORCH_PYTHON)
  add_test(NAME nn_ref_generate
    COMMAND ${NABLA_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/nn_ref.py ${NABLA_NN_REF})
else()
  message(WARNING "python3 not found: nn_ref_generate and test_nn_torch will fail (apt-get install python3-torch)")
  add_test(NAME nn_ref_generate COMMAND ${CMAKE_COMMAND} -E false)
endif()
set_tests_properties(nn_ref_generate PROPERTIES FIXTURES_SETUP nn_ref TIMEOUT 120)

add_executable(test_nn_torch test_nn_torch.c)
target_include_directories(test_nn_torch PRIVATE ${CMOCKA_INCLUDE_DIR})
target_include_directories(test_nn_torch PRIVATE ${CMAKE_SOURCE_DIR}/include)
target_link_libraries(test_nn_torch PRIVATE nabla_static ${CMOCKA_LIBRARY} m)
add_test(NAME test_nn_torch COMMAND test_nn_torch ${NABLA_NN_REF})
set_tests_properties(test_nn_torch PROPERTIES FIXTURES_REQUIRED nn_ref TIMEOUT 120
  FIXTURES_SETUP torch_coverage ENVIRONMENT "NABLA_OP_COVERAGE=${CMAKE_CURRENT_BINARY_DIR}/op_coverage_nn.txt")
