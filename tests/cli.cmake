# CLI tests: the metric functions of `bert8 eval` (unit) and the text commands and eval run as
# subprocesses of the built tool on the golden models (model).
bert8_add_test(test_metrics unit test_metrics.c ${CMAKE_SOURCE_DIR}/tools/metrics.c)
target_include_directories(test_metrics PRIVATE ${CMAKE_SOURCE_DIR}/tools)
