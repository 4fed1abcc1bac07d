# Hostile inputs and the sanitizers' reach: the hostile-file corpus through every parser, and (ASan builds) the proof that freed cache blocks are poisoned.
#
# hostile_files generates several hundred malformed files per parser (ONNX models among them) into the build folder
# (tests/hostile_files.py, standard-library Python); hostile_api feeds each to the library's
# loaders (tests/hostile_test.c: succeed, or fail with nb_error() set); hostile_cli runs each
# through the `nabla` subcommands that take files, which must exit with a code and a message,
# never a signal. Under ASan the reports are made fatal so a finding cannot pass as an error.
set(NABLA_HOSTILE_DIR ${CMAKE_CURRENT_BINARY_DIR}/hostile_files)
if(EXISTS /usr/bin/python3)
  set(NABLA_HOSTILE_PYTHON /usr/bin/python3)
else()
  find_program(NABLA_HOSTILE_PYTHON NAMES python3)
  if(NOT NABLA_HOSTILE_PYTHON)
    set(NABLA_HOSTILE_PYTHON python3) # fails at test time, naming what is missing
  endif()
endif()
add_test(NAME hostile_files COMMAND ${NABLA_HOSTILE_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/hostile_files.py ${NABLA_HOSTILE_DIR})
set_tests_properties(hostile_files PROPERTIES FIXTURES_SETUP hostile_fixture TIMEOUT 120)

add_executable(hostile_test hostile_test.c)
target_link_libraries(hostile_test PRIVATE nabla m)
add_test(NAME hostile_api COMMAND hostile_test ${NABLA_HOSTILE_DIR})
add_test(NAME hostile_cli COMMAND ${NABLA_HOSTILE_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/hostile_files.py --cli $<TARGET_FILE:nabla-cli> ${NABLA_HOSTILE_DIR})
set_tests_properties(hostile_api hostile_cli PROPERTIES FIXTURES_REQUIRED hostile_fixture TIMEOUT 900)
if(NABLA_SANITIZE)
  set_tests_properties(hostile_api hostile_cli PROPERTIES ENVIRONMENT
    "ASAN_OPTIONS=halt_on_error=1:detect_leaks=1;UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1")
endif()

# A read of a released tensor's data must be reported by ASan: passes only on ASan's report.
if(NABLA_SANITIZE)
  add_executable(uaf_test uaf_test.c)
  target_link_libraries(uaf_test PRIVATE nabla)
  add_test(NAME uaf_poisoned COMMAND uaf_test)
  set_tests_properties(uaf_poisoned PROPERTIES PASS_REGULAR_EXPRESSION "use-after-poison|heap-use-after-free"
    ENVIRONMENT "ASAN_OPTIONS=halt_on_error=1:detect_leaks=0")
endif()
