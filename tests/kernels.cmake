# Kernel tests: CPU dispatch, INT8 GEMM twins and quantize twins (label: kernel).
bert8_add_test(test_cpu kernel test_cpu.c test_cpu_spawn.c)
bert8_add_test(test_qgemm kernel test_qgemm.c test_cpu_spawn.c)
bert8_add_test(test_qgemm_quantize kernel test_qgemm_quantize.c test_cpu_spawn.c)
# Kernel choice under each BERT8_MAX_ISA level; levels this CPU lacks report "skipped".
add_executable(test_dispatch test_dispatch.c)
target_link_libraries(test_dispatch PRIVATE bert8_testutil m)
foreach(isa scalar avx2 avx512 avx512_vnni amx)
  add_test(NAME test_dispatch_${isa} COMMAND test_dispatch ${isa} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(test_dispatch_${isa} PROPERTIES LABELS kernel SKIP_RETURN_CODE 77 ENVIRONMENT BERT8_MAX_ISA=${isa})
endforeach()
add_test(NAME test_dispatch_bad_cap COMMAND test_dispatch bad-cap WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_dispatch_bad_cap PROPERTIES LABELS kernel ENVIRONMENT BERT8_MAX_ISA=avx512vnni)
