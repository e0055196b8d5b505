# Per-call latency (median, p50, p99) of one model folder, bench/peers' short-query columns: a program, not a test.
add_executable(bench_latency ${CMAKE_CURRENT_LIST_DIR}/bench_latency.c)
target_link_libraries(bench_latency PRIVATE bert8)
set_target_properties(bench_latency PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
# Its p99 labelling (a p99 only from 10,000 calls or more; --p99 makes them): a test of the program.
if(BERT8_BUILD_TESTS)
  add_test(NAME bench_latency_p99 COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/scripts/test_bench_latency.py
           $<TARGET_FILE:bench_latency> ${BERT8_SHARED_DIR}/golden/models/bert_model WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(bench_latency_p99 PROPERTIES LABELS model TIMEOUT 600)
endif()
