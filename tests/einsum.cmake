# nb_einsum against torch.einsum (tests/test_einsum_torch.c): values and gradients of each
# equation of tests/einsum_ref.py, the greedy contraction path, and the errors.
#
# einsum_ref_generate runs tests/einsum_ref.py with Debian's python3-torch to write the reference
# file; it is a CTest fixture that test_einsum_torch requires, so `ctest -R einsum` runs both, in
# order. Without python3 or torch the generator fails and so does the test: nothing is skipped.
# NABLA_TORCH_PYTHON comes from tests/nn.cmake, included before this file. The test links the
# static library for src/ops/einsum.h's nb__einsum_path.
set(NABLA_EINSUM_REF ${CMAKE_CURRENT_BINARY_DIR}/einsum_ref.txt)

if(NABLA_TORCH_PYTHON)
  add_test(NAME einsum_ref_generate
    COMMAND ${NABLA_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/einsum_ref.py ${NABLA_EINSUM_REF})
else()
  message(WARNING "python3 not found: einsum_ref_generate and test_einsum_torch will fail (apt-get install python3-torch)")
  add_test(NAME einsum_ref_generate COMMAND ${CMAKE_COMMAND} -E false)
endif()
set_tests_properties(einsum_ref_generate PROPERTIES FIXTURES_SETUP einsum_ref TIMEOUT 120)

add_executable(test_einsum_torch test_einsum_torch.c)
target_include_directories(test_einsum_torch PRIVATE ${CMOCKA_INCLUDE_DIR})
target_include_directories(test_einsum_torch PRIVATE ${CMAKE_SOURCE_DIR}/include)
target_link_libraries(test_einsum_torch PRIVATE nabla_static ${CMOCKA_LIBRARY} m)
add_test(NAME test_einsum_torch COMMAND test_einsum_torch ${NABLA_EINSUM_REF})
set_tests_properties(test_einsum_torch PROPERTIES FIXTURES_REQUIRED einsum_ref TIMEOUT 120)
