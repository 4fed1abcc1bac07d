# Pretrained checkpoints (src/hf/ loaders) against transformers and sentence-transformers:
# tests/hf_ref.py writes the references in the environment of scripts/hf_ref_env.sh (made on
# first use; Debian's torch with transformers from PyPI), then test_hf_models compares.
add_executable(test_hf_models test_hf_models.c)
target_include_directories(test_hf_models PRIVATE ${CMOCKA_INCLUDE_DIR})
target_link_libraries(test_hf_models PRIVATE nabla ${CMOCKA_LIBRARY} m)
add_test(NAME test_hf_models COMMAND sh -c
  "py=$(${CMAKE_SOURCE_DIR}/scripts/hf_ref_env.sh) && HF_HUB_OFFLINE=1 \"$py\" ${CMAKE_CURRENT_SOURCE_DIR}/hf_ref.py hf_ref && \
   $<TARGET_FILE:test_hf_models> hf_ref")
