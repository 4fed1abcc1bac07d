# The model server (issue 36), included when libmicrohttpd is built in: the C embedding test
# (nabla/serve.h, a nabla model.safetensors) and the end-to-end test of `nabla serve` against
# `nabla run` over both protocols (tests/serve_test.py: ONNX models from Debian's python3-torch;
# skipped without torch).
add_executable(serve_embed_test serve_embed_test.c)
target_include_directories(serve_embed_test PRIVATE ${CMOCKA_INCLUDE_DIR} ${JANSSON_INCLUDE_DIR})
target_link_libraries(serve_embed_test PRIVATE nabla ${CMOCKA_LIBRARY} ${JANSSON_LIBRARY} m)
add_test(NAME serve_embed COMMAND serve_embed_test)
set_tests_properties(serve_embed PROPERTIES TIMEOUT 60)

if(EXISTS /usr/bin/python3)
  set(NABLA_SERVE_PYTHON /usr/bin/python3)
else()
  find_program(NABLA_SERVE_PYTHON NAMES python3)
endif()
add_test(NAME serve_e2e COMMAND ${NABLA_SERVE_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/serve_test.py
  $<TARGET_FILE:nabla-cli> ${CMAKE_CURRENT_BINARY_DIR}/serve_e2e)
set_tests_properties(serve_e2e PROPERTIES TIMEOUT 110 SKIP_RETURN_CODE 77
  PASS_REGULAR_EXPRESSION "every serving check passed")

# NVIDIA Triton's HTTP client against the server, in the pinned PyPI environment of
# scripts/triton_env.sh (made on first use; skipped when it cannot be made).
add_test(NAME serve_triton COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/serve_triton_test.sh ${CMAKE_SOURCE_DIR}
  $<TARGET_FILE:nabla-cli> ${CMAKE_CURRENT_BINARY_DIR}/serve_triton)
set_tests_properties(serve_triton PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
  PASS_REGULAR_EXPRESSION "tritonclient checks passed")
