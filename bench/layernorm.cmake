# LayerNorm -> int8 row benchmark (time, GB/s, writer core): a program, not a test.
add_executable(bench_layernorm ${CMAKE_CURRENT_LIST_DIR}/bench_layernorm.c)
target_link_libraries(bench_layernorm PRIVATE bert8)
target_include_directories(bench_layernorm PRIVATE ${CMAKE_SOURCE_DIR}/src)
set_target_properties(bench_layernorm PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
