# Model-level tests: golden outputs, loading errors.
add_library(bert8_golden STATIC ${CMAKE_CURRENT_LIST_DIR}/golden.c)
target_link_libraries(bert8_golden PUBLIC bert8_testutil)
bert8_add_test(test_golden_models model test_golden_models.c)
target_link_libraries(test_golden_models PRIVATE bert8_golden)
bert8_add_test(test_model_errors unit test_model_errors.c)
bert8_add_test(test_int8_models model test_int8_models.c)
target_link_libraries(test_int8_models PRIVATE bert8_golden m)
