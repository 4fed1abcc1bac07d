# Pretrained checkpoints (src/hf/ loaders, nabla generate / embed) against transformers and
# sentence-transformers: hf_ref_data writes the references with tests/hf_ref.py in the
# environment of scripts/hf_ref_env.sh (made on first use; Debian's torch with transformers from
# PyPI), then test_hf_models and hf_cli compare.
add_executable(test_hf_models test_hf_models.c)
target_include_directories(test_hf_models PRIVATE ${CMOCKA_INCLUDE_DIR})
target_link_libraries(test_hf_models PRIVATE nabla ${CMOCKA_LIBRARY} m)
add_test(NAME hf_ref_data COMMAND sh -c
  "py=$(${CMAKE_SOURCE_DIR}/scripts/hf_ref_env.sh) && HF_HUB_OFFLINE=1 \"$py\" ${CMAKE_CURRENT_SOURCE_DIR}/hf_ref.py hf_ref")
set_tests_properties(hf_ref_data PROPERTIES FIXTURES_SETUP hf_ref)
add_test(NAME test_hf_models COMMAND test_hf_models hf_ref)
add_test(NAME hf_cli COMMAND sh -c
  "${CMAKE_CURRENT_SOURCE_DIR}/hf_cli_test.sh $<TARGET_FILE:nabla-cli> hf_ref $(${CMAKE_SOURCE_DIR}/scripts/hf_ref_env.sh)")
set_tests_properties(test_hf_models hf_cli PROPERTIES FIXTURES_REQUIRED hf_ref)
# Fine-tuning (`nabla train --model DIR --data FILE.txt`): test_hf_finetune checks the library's
# pieces (dropout in train mode, the causal LM loss, text blocks, nb_hf_save and the untouched
# input files); hf_finetune_cli fine-tunes hf_ref/gpt2_ft with the CLI and holds the result to
# tests/hf_ref.py's torch run, from_pretrained of the saved folder and its bad-input cases.
add_executable(test_hf_finetune test_hf_finetune.c)
target_include_directories(test_hf_finetune PRIVATE ${CMOCKA_INCLUDE_DIR})
target_link_libraries(test_hf_finetune PRIVATE nabla ${CMOCKA_LIBRARY} m)
add_test(NAME test_hf_finetune COMMAND test_hf_finetune hf_ref)
add_test(NAME hf_finetune_cli COMMAND sh -c
  "${CMAKE_CURRENT_SOURCE_DIR}/hf_finetune_test.sh $<TARGET_FILE:nabla-cli> $<TARGET_FILE:test_hf_finetune> hf_ref $(${CMAKE_SOURCE_DIR}/scripts/hf_ref_env.sh)")
set_tests_properties(test_hf_finetune hf_finetune_cli PROPERTIES FIXTURES_REQUIRED hf_ref)
