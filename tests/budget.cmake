# INT8 to an accuracy budget: the search on a golden model with an artificial evaluation callback,
# the config round trip, bad budgets (library); `bert8 quantize --max-drop` end to end (CLI).
bert8_add_test(test_budget model test_budget.c)
target_link_libraries(test_budget PRIVATE bert8_golden m)
