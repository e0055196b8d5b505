# Tokenizer throughput (tokens/s, one thread) on SST-2: a program, not a test.
add_executable(bench_tokenizer ${CMAKE_CURRENT_LIST_DIR}/bench_tokenizer.c)
target_link_libraries(bench_tokenizer PRIVATE bert8)
target_include_directories(bench_tokenizer PRIVATE ${CMAKE_SOURCE_DIR}/src)
