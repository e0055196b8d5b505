add_executable(make_checkpoint ${CMAKE_CURRENT_LIST_DIR}/make_checkpoint.c)
target_link_libraries(make_checkpoint PRIVATE bert8)
target_include_directories(make_checkpoint PRIVATE ${CMAKE_SOURCE_DIR}/src)
add_executable(bench_fp32 ${CMAKE_CURRENT_LIST_DIR}/bench_fp32.c)
target_link_libraries(bench_fp32 PRIVATE bert8)
target_include_directories(bench_fp32 PRIVATE ${CMAKE_SOURCE_DIR}/src)
# Resident memory of a folder in use (load, one batch, a sweep over the whole vocabulary).
add_executable(bench_rss ${CMAKE_CURRENT_LIST_DIR}/bench_rss.c)
target_link_libraries(bench_rss PRIVATE bert8)
