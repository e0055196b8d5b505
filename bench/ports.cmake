# Which float instructions share the INT8 product's pipes on this CPU: a program, not a test.
add_executable(bench_ports ${CMAKE_CURRENT_LIST_DIR}/bench_ports.c)
set_target_properties(bench_ports PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
