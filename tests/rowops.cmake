bert8_add_test(test_rowops kernel test_rowops.c)
target_link_libraries(test_rowops PRIVATE m)
