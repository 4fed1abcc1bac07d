# State dicts, checkpoints and NPY (tests/test_io.c), with interop against PyTorch and NumPy:
# io_ref_make runs tests/io_ref.py to write PyTorch's safetensors and NumPy's .npy files,
# test_io loads them and writes nabla's files into the same folder, and io_ref_check has
# PyTorch and NumPy read nabla's files back. Fixtures keep the order.
add_executable(test_io test_io.c)
target_include_directories(test_io PRIVATE ${CMOCKA_INCLUDE_DIR})
target_link_libraries(test_io PRIVATE nabla ${CMOCKA_LIBRARY} m)
set(NABLA_IO_REF_DIR ${CMAKE_CURRENT_BINARY_DIR}/io_ref)
if(NOT NABLA_TORCH_PYTHON)
  if(EXISTS /usr/bin/python3)
    set(NABLA_TORCH_PYTHON /usr/bin/python3 CACHE FILEPATH "Python with torch for the PyTorch reference tests")
  else()
    find_program(NABLA_TORCH_PYTHON NAMES python3)
  endif()
endif()
add_test(NAME test_io COMMAND test_io ${NABLA_IO_REF_DIR})
add_test(NAME io_ref_make COMMAND ${NABLA_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/io_ref.py make ${NABLA_IO_REF_DIR})
set_tests_properties(io_ref_make PROPERTIES FIXTURES_SETUP io_ref TIMEOUT 120)
set_tests_properties(test_io PROPERTIES FIXTURES_REQUIRED io_ref FIXTURES_SETUP io_nabla TIMEOUT 120)
# Without jansson test_io skips its safetensors cases (NPY remains) and these two, which read
# safetensors files, are not registered.
if(NABLA_WITH_JSON)
  add_test(NAME io_ref_check COMMAND ${NABLA_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/io_ref.py check ${NABLA_IO_REF_DIR})
  set_tests_properties(io_ref_check PROPERTIES FIXTURES_REQUIRED "io_ref;io_nabla" TIMEOUT 120)
  # nabla-info (tools/nabla_info.c) prints a state dict's tensors and metadata.
  add_test(NAME nabla_info_runs COMMAND nabla-info ${NABLA_IO_REF_DIR}/torch_mlp.safetensors)
  set_tests_properties(nabla_info_runs PROPERTIES FIXTURES_REQUIRED io_ref
    PASS_REGULAR_EXPRESSION "0.weight +F32 +\\[16, 6\\].*parameters: 195")
endif()
