# ONNX export against ONNX Runtime (tests/onnx_export_models.c writes the models and nabla's
# outputs; tests/onnx_export_check.py runs onnx's checker and ONNX Runtime on them in the PyPI
# environment of scripts/onnx_env.sh, made on first use, and nabla's own importer through
# `nabla run`).
add_executable(onnx_export_models onnx_export_models.c)
target_link_libraries(onnx_export_models PRIVATE nabla m)
add_test(NAME onnx_export_ort COMMAND sh -c
  "py=$(${CMAKE_SOURCE_DIR}/scripts/onnx_env.sh) && rm -rf onnx_export && mkdir onnx_export && \
   $<TARGET_FILE:onnx_export_models> onnx_export && \"$py\" ${CMAKE_CURRENT_SOURCE_DIR}/onnx_export_check.py onnx_export \
   --nabla $<TARGET_FILE:nabla-cli>")
# the exporter's errors, and a failed export keeping the old file
nabla_test(test_onnx_export)
