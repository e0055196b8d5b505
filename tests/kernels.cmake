# Kernel tests: CPU dispatch, INT8 GEMM twins and quantize twins (label: kernel).
bert8_add_test(test_cpu kernel test_cpu.c test_cpu_spawn.c)
bert8_add_test(test_qgemm kernel test_qgemm.c test_cpu_spawn.c)
bert8_add_test(test_qgemm_quantize kernel test_qgemm_quantize.c test_cpu_spawn.c)
