# INT8 to an accuracy budget: the search on a golden model with an artificial evaluation callback,
# the config round trip, bad budgets (library); `bert8 quantize --max-drop` end to end (CLI).
bert8_add_test(test_budget model test_budget.c)
target_link_libraries(test_budget PRIVATE bert8_golden m)
bert8_add_test(test_budget_cli model test_budget_cli.c)
add_dependencies(test_budget_cli bert8_cli)
set_tests_properties(test_budget_cli PROPERTIES TIMEOUT 600)
# `bert8 quantize --min-cosine` end to end (CLI): the label-free embedding-fidelity budget.
bert8_add_test(test_budget_cosine_cli model test_budget_cosine_cli.c)
add_dependencies(test_budget_cosine_cli bert8_cli)
set_tests_properties(test_budget_cosine_cli PROPERTIES TIMEOUT 600)
