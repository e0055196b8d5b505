# Per-call latency (median, p50, p99) of one model folder, bench/peers' short-query columns: a program, not a test.
add_executable(bench_latency ${CMAKE_CURRENT_LIST_DIR}/bench_latency.c)
target_link_libraries(bench_latency PRIVATE bert8)
set_target_properties(bench_latency PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
