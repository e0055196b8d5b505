# safetensors reader/writer, sharded index, conversions and corruption fuzz (label: unit).
bert8_add_test(test_safetensors unit ${CMAKE_CURRENT_SOURCE_DIR}/test_safetensors.c)
