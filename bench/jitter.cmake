# The machine's own per-call jitter floor (p99 / p50 of a fixed unit of arithmetic on T threads): a program, not a test.
find_package(Threads REQUIRED)
add_executable(bench_jitter ${CMAKE_CURRENT_LIST_DIR}/bench_jitter.c)
target_link_libraries(bench_jitter PRIVATE Threads::Threads)
set_target_properties(bench_jitter PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
