# Two builds of libbert8.so alternated call by call in one process: a program, not a test.
add_executable(bench_ab ${CMAKE_CURRENT_LIST_DIR}/bench_ab.c)
target_include_directories(bench_ab PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(bench_ab PRIVATE ${CMAKE_DL_LIBS} m)
set_target_properties(bench_ab PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
