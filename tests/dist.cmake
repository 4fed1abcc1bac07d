# nabla/dist.h under mpirun (tests/test_dist*.c): the collectives and DDP with 2 and 3 ranks on
# this machine, one kernel thread per rank, Open MPI kept on shared memory and self (no network),
# allowed to run as root (CI) and to put 3 ranks on 2 cores; each also runs as one plain process.
# A build without MPI runs each program once, and it reports SKIPPED (exit 77).
set(NABLA_DIST_TESTS test_dist test_dist_ddp test_dist_timeout)
set(NABLA_DIST_ENV "NABLA_NUM_THREADS=1" "OMPI_MCA_btl=self,vader" "OMPI_MCA_pml=ob1"
  "OMPI_MCA_btl_vader_single_copy_mechanism=none" "OMPI_MCA_rmaps_base_oversubscribe=1"
  "OMPI_MCA_mpi_yield_when_idle=1" "NABLA_DIST_TIMEOUT=30")
# Open MPI's own allocations live until the process exits (its components, PMIx, hwloc, libevent)
# and LeakSanitizer reports them: tests/dist_lsan.supp suppresses the stacks that run through
# those libraries. Matching them needs whole stacks (the fast unwinder stops at the first frame
# of a library built without frame pointers), so malloc stacks are unwound the slow way here.
if(NABLA_SANITIZE)
  list(APPEND NABLA_DIST_ENV "ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0"
    "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/dist_lsan.supp:print_suppressions=0")
endif()
foreach(t ${NABLA_DIST_TESTS})
  add_executable(${t} ${t}.c)
  target_include_directories(${t} PRIVATE ${CMOCKA_INCLUDE_DIR})
  target_link_libraries(${t} PRIVATE nabla ${CMOCKA_LIBRARY} m)
  if(NABLA_WITH_MPI)
    target_compile_definitions(${t} PRIVATE NABLA_WITH_MPI)
  endif()
endforeach()
if(NABLA_WITH_MPI AND MPIEXEC_EXECUTABLE)
  foreach(t ${NABLA_DIST_TESTS})
    foreach(n 2 3)
      add_test(NAME ${t}_np${n} COMMAND ${MPIEXEC_EXECUTABLE} --allow-run-as-root --oversubscribe ${MPIEXEC_NUMPROC_FLAG} ${n}
        $<TARGET_FILE:${t}>)
      # the ranks share the 2 cores: run alone, not beside other tests
      set_tests_properties(${t}_np${n} PROPERTIES ENVIRONMENT "${NABLA_DIST_ENV}" TIMEOUT 300 SKIP_RETURN_CODE 77
        RUN_SERIAL TRUE)
    endforeach()
    add_test(NAME ${t}_single COMMAND ${t})
    set_tests_properties(${t}_single PROPERTIES ENVIRONMENT "${NABLA_DIST_ENV}" TIMEOUT 300 SKIP_RETURN_CODE 77)
  endforeach()
  set_tests_properties(test_dist_timeout_np2 test_dist_timeout_np3 test_dist_timeout_single PROPERTIES
    ENVIRONMENT "${NABLA_DIST_ENV};NABLA_DIST_TIMEOUT=1")
  # two hosts: one rank in each of two network namespaces, MPI over TCP on a veth pair
  add_test(NAME dist_two_hosts COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/dist_netns_test.sh $<TARGET_FILE:test_dist_ddp> ${MPIEXEC_EXECUTABLE})
  set_tests_properties(dist_two_hosts PROPERTIES ENVIRONMENT "${NABLA_DIST_ENV}" TIMEOUT 300 RUN_SERIAL TRUE
    SKIP_RETURN_CODE 77 SKIP_REGULAR_EXPRESSION "SKIPPED:" PASS_REGULAR_EXPRESSION "dist_netns_test: all passed")
  # they save and load checkpoints: not in a build without jansson
  if(NABLA_WITH_JSON)
    # sharded checkpoints across world sizes and sharding modes
    add_executable(dist_resume dist_resume.c)
    target_link_libraries(dist_resume PRIVATE nabla m)
    add_test(NAME dist_resume COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/dist_resume_test.sh $<TARGET_FILE:dist_resume> ${MPIEXEC_EXECUTABLE})
    set_tests_properties(dist_resume PROPERTIES ENVIRONMENT "${NABLA_DIST_ENV}" TIMEOUT 300 RUN_SERIAL TRUE
      PASS_REGULAR_EXPRESSION "dist_resume_test: all passed")
    # nabla train on 2 ranks (--nproc and mpirun), a killed rank, and the restart from a checkpoint
    add_test(NAME nabla_train_ranks COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/dist_cli_test.sh $<TARGET_FILE:nabla-cli>)
    set_tests_properties(nabla_train_ranks PROPERTIES ENVIRONMENT "${NABLA_DIST_ENV}" TIMEOUT 300 RUN_SERIAL TRUE
      PASS_REGULAR_EXPRESSION "dist_cli_test: all passed")
    # rank 1 stopped (SIGSTOP): the other ranks end within the timeout + 5 s naming it
    add_test(NAME nabla_train_stopped_rank COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/dist_stop_test.sh $<TARGET_FILE:nabla-cli>)
    set_tests_properties(nabla_train_stopped_rank PROPERTIES ENVIRONMENT "${NABLA_DIST_ENV}" TIMEOUT 200 RUN_SERIAL TRUE
      PASS_REGULAR_EXPRESSION "dist_stop_test: all passed")
  endif()
else()
  foreach(t ${NABLA_DIST_TESTS})
    add_test(NAME ${t} COMMAND ${t})
    set_tests_properties(${t} PROPERTIES SKIP_RETURN_CODE 77)
  endforeach()
endif()
