# scripts/check_layers.py itself: planted include and call cycles, a back-edge and a stale known
# cycle each fail it, naming what they are (label unit).
add_test(NAME check_layers_finds_cycles COMMAND python3 ${CMAKE_SOURCE_DIR}/tests/scripts/test_check_layers.py
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(check_layers_finds_cycles PROPERTIES LABELS unit)
