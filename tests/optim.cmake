# NAdam, RAdam, Adamax, Adadelta, LBFGS, the newer schedules and clipping by value against
# PyTorch (tests/test_optim_torch.c).
#
# optim_ref_generate runs tests/optim_ref.py with Debian's python3-torch to write the reference
# file; it is a CTest fixture that test_optim_torch requires, so `ctest -R optim` runs both, in
# order. Without python3 or torch the generator fails and so does the test: nothing is skipped.
# NABLA_TORCH_PYTHON comes from tests/nn.cmake, included before this file.
set(NABLA_OPTIM_REF ${CMAKE_CURRENT_BINARY_DIR}/optim_ref.txt)

if(NABLA_TORCH_PYTHON)
  add_test(NAME optim_ref_generate
    COMMAND ${NABLA_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/optim_ref.py ${NABLA_OPTIM_REF})
else()
  message(WARNING "python3 not found: optim_ref_generate and test_optim_torch will fail (apt-get install python3-torch)")
  add_test(NAME optim_ref_generate COMMAND ${CMAKE_COMMAND} -E false)
endif()
set_tests_properties(optim_ref_generate PROPERTIES FIXTURES_SETUP optim_ref TIMEOUT 120)

add_executable(test_optim_torch test_optim_torch.c)
target_include_directories(test_optim_torch PRIVATE ${CMOCKA_INCLUDE_DIR})
target_include_directories(test_optim_torch PRIVATE ${CMAKE_SOURCE_DIR}/include)
target_link_libraries(test_optim_torch PRIVATE nabla_static ${CMOCKA_LIBRARY} m)
add_test(NAME test_optim_torch COMMAND test_optim_torch ${NABLA_OPTIM_REF})
# the compiled step's kernels go to a cache inside the build tree
set_tests_properties(test_optim_torch PROPERTIES FIXTURES_REQUIRED optim_ref TIMEOUT 180
  ENVIRONMENT "NABLA_CACHE_DIR=${CMAKE_BINARY_DIR}/kernel-cache")
