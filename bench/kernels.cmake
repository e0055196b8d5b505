# INT8 GEMM kernel benchmark (GOP/s and % of the vpdpbusd peak): a program, not a test.
add_executable(bench_qgemm ${CMAKE_CURRENT_LIST_DIR}/bench_qgemm.c)
target_link_libraries(bench_qgemm PRIVATE bert8)
target_include_directories(bench_qgemm PRIVATE ${CMAKE_SOURCE_DIR}/src)
set_target_properties(bench_qgemm PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
