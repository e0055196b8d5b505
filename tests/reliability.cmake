# Hostile input, faults and threads (issue 13): limits and type checks of the parsers,
# non-regular files, the crash-safe folder writer, several threads on one model.
bert8_add_test(test_tokenizer_limits unit ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_limits.c)
bert8_add_test(test_hostile_files unit ${CMAKE_CURRENT_LIST_DIR}/test_hostile_files.c)
bert8_add_test(test_atomic_dir unit ${CMAKE_CURRENT_LIST_DIR}/test_atomic_dir.c)
# The ENOSPC case mounts a 1 MiB tmpfs: skipped (exit 77) where mounting is not permitted.
add_test(NAME test_atomic_dir_full_disk COMMAND test_atomic_dir full-disk WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_atomic_dir_full_disk PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
# Kill-during-quantize loop (100 SIGKILLs, about 10 s): in the Release suite; under the
# sanitizers only with BERT8_SLOW=1 (else skipped).
if(BERT8_SANITIZE)
  set(_killq_gate CTEST_GATED=1)
else()
  set(_killq_gate CTEST_GATED=)
endif()
add_test(NAME kill_during_quantize
         COMMAND ${CMAKE_COMMAND} -E env ${_killq_gate} bash ${CMAKE_SOURCE_DIR}/scripts/kill_quantize_loop.sh ${CMAKE_BINARY_DIR} 100)
set_tests_properties(kill_during_quantize PROPERTIES LABELS unit SKIP_RETURN_CODE 77 TIMEOUT 900)
# Several threads on one model, each with its own session (label threads: scripts/tsan.sh
# runs these under ThreadSanitizer).
bert8_add_test(test_threads model ${CMAKE_CURRENT_LIST_DIR}/test_threads.c)
find_package(Threads REQUIRED)
target_link_libraries(test_threads PRIVATE Threads::Threads m)
set_tests_properties(test_threads PROPERTIES LABELS "model;threads")
# The thread pool of the kernels and the forward pass (label threads: under ThreadSanitizer too).
bert8_add_test(test_pool unit ${CMAKE_CURRENT_LIST_DIR}/test_pool.c)
target_link_libraries(test_pool PRIVATE Threads::Threads)
set_tests_properties(test_pool PROPERTIES LABELS "unit;threads" TIMEOUT 300)
