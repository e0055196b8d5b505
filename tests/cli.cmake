# CLI tests: the metric functions of `bert8 eval` (unit) and the text commands and eval run as
# subprocesses of the built tool on the golden models (model).
bert8_add_test(test_metrics unit test_metrics.c ${CMAKE_SOURCE_DIR}/tools/metrics.c)
target_include_directories(test_metrics PRIVATE ${CMAKE_SOURCE_DIR}/tools)
bert8_add_test(test_cli model test_cli.c ${CMAKE_SOURCE_DIR}/tools/metrics.c)
target_include_directories(test_cli PRIVATE ${CMAKE_SOURCE_DIR}/tools)
target_link_libraries(test_cli PRIVATE bert8_golden m)
add_dependencies(test_cli bert8_cli)
# One version source: the CLI (bert8_version(), from the header's macros) prints the version CMake
# read from the same header.
add_test(NAME version_matches_cmake COMMAND bert8_cli --version)
set_tests_properties(version_matches_cmake PROPERTIES LABELS unit PASS_REGULAR_EXPRESSION "^bert8 ${PROJECT_VERSION}\n$")
