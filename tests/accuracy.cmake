# Accuracy regression: bert8 eval of the embedded SST-2 model, FP32 and INT8, on the first 200
# dev rows, against the counts scripts/accuracy_report.sh recorded in docs/accuracy.json.
bert8_add_test(test_accuracy model test_accuracy.c)
target_compile_definitions(test_accuracy PRIVATE BERT8_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_dependencies(test_accuracy bert8_cli)
set_tests_properties(test_accuracy PROPERTIES TIMEOUT 120)
