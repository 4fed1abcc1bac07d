# The input pipeline (tests/test_data.c). data_ref_generate runs tests/data_ref.py with Debian's
# python3 (NumPy, Pillow) to write the NPY, CSV and PNG files the readers are checked against; it is
# a CTest fixture that test_data requires. The IDX reader reads Debian's dataset-fashion-mnist.
if(NOT NABLA_TORCH_PYTHON)
  if(EXISTS /usr/bin/python3)
    set(NABLA_TORCH_PYTHON /usr/bin/python3 CACHE FILEPATH "Python with torch for the PyTorch reference tests")
  else()
    find_program(NABLA_TORCH_PYTHON NAMES python3)
  endif()
endif()
set(NABLA_DATA_REF ${CMAKE_CURRENT_BINARY_DIR}/data_ref)
add_test(NAME data_ref_generate COMMAND ${NABLA_TORCH_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/data_ref.py ${NABLA_DATA_REF})
set_tests_properties(data_ref_generate PROPERTIES FIXTURES_SETUP data_ref TIMEOUT 60)

add_executable(test_data test_data.c)
target_include_directories(test_data PRIVATE ${CMOCKA_INCLUDE_DIR})
target_link_libraries(test_data PRIVATE nabla ${CMOCKA_LIBRARY} ${ZLIB_LIBRARIES} m) # zlib: the test gzips a hostile header
if(NABLA_JPEG_USED) # JPEGs are compared with Pillow's pixels; without libjpeg, the error is checked
  target_compile_definitions(test_data PRIVATE NABLA_HAVE_JPEG)
endif()
add_test(NAME test_data COMMAND test_data ${NABLA_DATA_REF})
set_tests_properties(test_data PROPERTIES FIXTURES_REQUIRED data_ref TIMEOUT 120)
