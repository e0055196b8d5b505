# Huge-page weight arena on or off, alternated in one process: a program, not a test.
add_executable(bench_hugepages ${CMAKE_CURRENT_LIST_DIR}/bench_hugepages.c)
target_link_libraries(bench_hugepages PRIVATE bert8)
set_target_properties(bench_hugepages PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
