# Model-level tests: golden outputs, loading errors.
add_library(bert8_golden STATIC ${CMAKE_CURRENT_LIST_DIR}/golden.c)
target_link_libraries(bert8_golden PUBLIC bert8_testutil)
bert8_add_test(test_golden_models model test_golden_models.c)
target_link_libraries(test_golden_models PRIVATE bert8_golden)
bert8_add_test(test_model_errors unit test_model_errors.c)
bert8_add_test(test_int8_models model test_int8_models.c)
target_link_libraries(test_int8_models PRIVATE bert8_golden m)
# The same INT8 and FP32 model tests with the kernel choice capped, so the slower paths run here too.
foreach(isa avx2 scalar)
  add_test(NAME test_int8_models_${isa} COMMAND test_int8_models WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_int8_models_${isa} PROPERTIES LABELS model ENVIRONMENT BERT8_MAX_ISA=${isa})
  add_test(NAME test_golden_models_${isa} COMMAND test_golden_models WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_golden_models_${isa} PROPERTIES LABELS model ENVIRONMENT BERT8_MAX_ISA=${isa})
endforeach()
# Padding-free batches against padded ones, every golden model, FP32 and INT8.
bert8_add_test(test_packed model test_packed.c)
target_link_libraries(test_packed PRIVATE m)
# A model held for a long run: resident memory bounded whatever lengths it sees.
find_package(Threads REQUIRED)
bert8_add_test(test_memory model test_memory.c)
target_link_libraries(test_memory PRIVATE Threads::Threads)
# Sequence-parallel INT8 calls against op-by-op ones: every output bit for bit (also run under
# ThreadSanitizer: label threads, scripts/tsan.sh).
bert8_add_test(test_seq_parallel model test_seq_parallel.c)
set_tests_properties(test_seq_parallel PROPERTIES LABELS "model;threads")
