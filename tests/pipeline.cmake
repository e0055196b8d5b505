# Library pipelines (label: model): reference CLI outputs, batching, threads, errors.
find_package(Threads REQUIRED)
bert8_add_test(test_pipeline model test_pipeline.c)
target_link_libraries(test_pipeline PRIVATE m Threads::Threads)
