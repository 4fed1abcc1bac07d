# RNN, LSTM and GRU against PyTorch (tests/test_rnn_torch.c).
#
# rnn_ref_generate runs tests/rnn_ref.py with the python that tests/nn.cmake found
# (NABLA_TORCH_PYTHON) to write the reference; it is a CTest fixture that test_rnn_torch
# requires, so `ctest -R rnn` runs both, in order. Without python3 or torch the generator fails
# and so does the test: nothing is skipped.
set(NABLA_RNN_REF ${CMAKE_CURRENT_BINARY_DIR}/rnn_ref.txt)

if(NABLA_TORCH_PYTHON)
  add_test(NAME rnn_ref_generate
    COMMAND ${NABLA_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/rnn_ref.py ${NABLA_RNN_REF})
else()
  add_test(NAME rnn_ref_generate COMMAND ${CMAKE_COMMAND} -E false)
endif()
set_tests_properties(rnn_ref_generate PROPERTIES FIXTURES_SETUP rnn_ref TIMEOUT 120)

add_executable(test_rnn_torch test_rnn_torch.c)
target_include_directories(test_rnn_torch PRIVATE ${CMOCKA_INCLUDE_DIR} ${CMAKE_SOURCE_DIR}/include)
target_link_libraries(test_rnn_torch PRIVATE nabla_static ${CMOCKA_LIBRARY} m)
add_test(NAME test_rnn_torch COMMAND test_rnn_torch ${NABLA_RNN_REF})
set_tests_properties(test_rnn_torch PROPERTIES FIXTURES_REQUIRED rnn_ref TIMEOUT 120)
