# Convolution, pooling and batch norm: against PyTorch (tests/test_conv_torch.c, reference
# written by tests/conv_ref.py as a CTest fixture, like torch.cmake) and against finite
# differences in f64 (tests/test_conv_gradcheck.c). Without python3-torch the generator fails
# and so does the test: nothing is skipped.
if(NOT NABLA_TORCH_PYTHON AND EXISTS /usr/bin/python3)
  set(NABLA_TORCH_PYTHON /usr/bin/python3 CACHE FILEPATH "Python with torch for the PyTorch reference tests")
endif()
set(NABLA_CONV_REF ${CMAKE_CURRENT_BINARY_DIR}/conv_ref.txt)
if(NABLA_TORCH_PYTHON)
  add_test(NAME conv_ref_generate
    COMMAND ${NABLA_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/conv_ref.py ${NABLA_CONV_REF})
else()
  add_test(NAME conv_ref_generate COMMAND ${CMAKE_COMMAND} -E false)
endif()
set_tests_properties(conv_ref_generate PROPERTIES FIXTURES_SETUP conv_ref TIMEOUT 120)

add_executable(test_conv_torch test_conv_torch.c)
target_include_directories(test_conv_torch PRIVATE ${CMOCKA_INCLUDE_DIR})
target_include_directories(test_conv_torch PRIVATE ${CMAKE_SOURCE_DIR}/include)
target_link_libraries(test_conv_torch PRIVATE nabla_static ${CMOCKA_LIBRARY} m)
add_test(NAME test_conv_torch COMMAND test_conv_torch ${NABLA_CONV_REF})
set_tests_properties(test_conv_torch PROPERTIES FIXTURES_REQUIRED conv_ref TIMEOUT 300
  FIXTURES_SETUP torch_coverage ENVIRONMENT "NABLA_OP_COVERAGE=${CMAKE_CURRENT_BINARY_DIR}/op_coverage_conv.txt")

# Linked statically so it can also check the backward ops' own backwards through the op table.
add_executable(test_conv_gradcheck test_conv_gradcheck.c)
target_include_directories(test_conv_gradcheck PRIVATE ${CMOCKA_INCLUDE_DIR} ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(test_conv_gradcheck PRIVATE nabla_static ${CMOCKA_LIBRARY} m)
add_test(NAME test_conv_gradcheck COMMAND test_conv_gradcheck)
set_tests_properties(test_conv_gradcheck PROPERTIES TIMEOUT 300)
