# Tokenizer tests: behaviour units, the real-vocabulary goldens, tokenizer.json fixtures,
# and bounded random-input fuzzing (also meant for the ASan build).
bert8_add_test(test_tokenizer_golden model ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_golden.c)
bert8_add_test(test_tokenizer unit ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer.c)
find_package(Threads REQUIRED)
target_link_libraries(test_tokenizer PRIVATE Threads::Threads)
bert8_add_test(test_tokenizer_json unit ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_json.c)
bert8_add_test(test_tokenizer_fuzz unit ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_fuzz.c)
bert8_add_test(test_tokenizer_bpe unit ${CMAKE_CURRENT_LIST_DIR}/test_tokenizer_bpe.c)
