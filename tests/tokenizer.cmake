# Tokenizer tests: behaviour units, the real-vocabulary goldens, tokenizer.json fixtures,
# and bounded random-input fuzzing (also meant for the ASan build).
bert8_add_test(test_tokenizer_golden model ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_golden.c)
