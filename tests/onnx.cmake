# ONNX import (issue 18), included when NABLA_WITH_ONNX: the cmocka unit tests of the loader,
# ONNX's node conformance suite, the onnx.helper models against ONNX Runtime, and the generated
# operator table of docs/onnx.md. The suite and the ONNX Runtime check need the PyPI environment
# of scripts/onnx_env.sh (onnx, onnxruntime, numpy); onnx_import_env.sh makes or reuses it.
# The unit tests build their models with the generated protobuf-c code, so they link the static
# library (which holds it) and see the generated onnx.pb-c.h.
add_executable(test_onnx_import test_onnx_import.c)
target_include_directories(test_onnx_import PRIVATE ${CMOCKA_INCLUDE_DIR} ${CMAKE_BINARY_DIR}/generated ${PROTOBUF_C_INCLUDE_DIR})
target_link_libraries(test_onnx_import PRIVATE nabla_static ${CMOCKA_LIBRARY} m)
add_test(NAME test_onnx_import COMMAND test_onnx_import)
set_tests_properties(test_onnx_import PROPERTIES ENVIRONMENT "NABLA_CACHE_DIR=${CMAKE_BINARY_DIR}/kernel-cache")

# The conformance runner reads the importer's operator table, so it links the static library
# and sees the internal headers (the generated onnx.pb-c.h among them).
add_executable(onnx_conformance onnx_conformance.c)
target_include_directories(onnx_conformance PRIVATE ${CMAKE_BINARY_DIR}/generated ${PROTOBUF_C_INCLUDE_DIR})
target_link_libraries(onnx_conformance PRIVATE nabla_static m)

# The node tests are generated once into the build tree (about 10 s), then run (all data sets).
add_test(NAME onnx_conformance COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/onnx_import_test.sh conformance
  ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR} $<TARGET_FILE:onnx_conformance>)
set_tests_properties(onnx_conformance PROPERTIES TIMEOUT 300
  PASS_REGULAR_EXPRESSION "every test of a claimed operator passed")

# The same tests through nb_compile: models it cannot take (several outputs, shapes given as input
# values) are counted apart; every other one must pass.
add_test(NAME onnx_conformance_compiled COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/onnx_import_test.sh conformance
  ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR} $<TARGET_FILE:onnx_conformance> --compile)
set_tests_properties(onnx_conformance_compiled PROPERTIES TIMEOUT 300 DEPENDS onnx_conformance
  PASS_REGULAR_EXPRESSION "every test of a claimed operator passed" ENVIRONMENT "NABLA_CACHE_DIR=${CMAKE_BINARY_DIR}/kernel-cache")

# Models built with onnx.helper at opsets 11, 13, 17, 18 and 21 (Gemm, BatchNormalization,
# LayerNormalization, Shape->Gather->Concat->Reshape), integer Div and Mod, and the operators whose
# defaults changed between versions at the opsets around each change (Softmax's axis 1 and 2-D
# coercion before 13...), against ONNX Runtime within 1e-4, eagerly and compiled.
add_test(NAME onnx_import_ort COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/onnx_import_test.sh ort
  ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR} $<TARGET_FILE:onnx_conformance>)
set_tests_properties(onnx_import_ort PROPERTIES TIMEOUT 300 PASS_REGULAR_EXPRESSION "onnx_import_ref: all passed"
  ENVIRONMENT "NABLA_CACHE_DIR=${CMAKE_BINARY_DIR}/kernel-cache")

# PyTorch's own exports (torch.onnx.export of torchvision's ResNet-18 and an nn.TransformerEncoder,
# on Debian's torch) against ONNX Runtime within 1e-4, at batch 2 and 1, eagerly and compiled.
add_test(NAME onnx_torch_models COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/onnx_import_test.sh torch
  ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR} $<TARGET_FILE:onnx_conformance>)
set_tests_properties(onnx_torch_models PROPERTIES TIMEOUT 300
  PASS_REGULAR_EXPRESSION "onnx_torch_models: all passed" SKIP_REGULAR_EXPRESSION "SKIPPED"
  ENVIRONMENT "NABLA_CACHE_DIR=${CMAKE_BINARY_DIR}/kernel-cache;TORCH_PYTHON=${NABLA_TORCH_PYTHON}")

# The importer's attribute schemas (names, types, required, versions) against onnx's own.
add_test(NAME onnx_attr_schema COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/onnx_import_test.sh schema
  ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR} $<TARGET_FILE:onnx_conformance>)
set_tests_properties(onnx_attr_schema PROPERTIES TIMEOUT 300 PASS_REGULAR_EXPRESSION "the table matches onnx's schemas")

# docs/onnx.md's import section is generated from the operator table; fail when it is stale.
add_test(NAME onnx_doc_current COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/onnx_import_test.sh doc
  ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR} $<TARGET_FILE:onnx_conformance>)
