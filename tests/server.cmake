# Server tests: `bert8 serve` started on 127.0.0.1 by pytest (tests/server/), every route and
# error code, the real TEI clients (huggingface_hub, openai), batching under 64 concurrent
# clients, bad input, slow clients and SIGTERM. Label `server`.
add_test(NAME server_http COMMAND bash ${CMAKE_SOURCE_DIR}/tests/server/run.sh $<TARGET_FILE:bert8_cli>
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(server_http PROPERTIES LABELS server TIMEOUT 900
                     ENVIRONMENT "BERT8_SHARED_DIR=${BERT8_SHARED_DIR};BERT8_TEST_SLOW=$<IF:$<BOOL:${BERT8_SANITIZE}>,4,1>")
# The LD_PRELOAD shim that holds a model load open (test_health_is_503_while_loading); not built
# under sanitizers, whose runtime must come first in the preload list.
if(NOT BERT8_SANITIZE)
  add_library(hold_open MODULE ${CMAKE_SOURCE_DIR}/tests/server/hold_open.c)
  target_link_libraries(hold_open PRIVATE ${CMAKE_DL_LIBS})
  set_property(TEST server_http APPEND PROPERTY ENVIRONMENT "BERT8_HOLD_OPEN_LIB=$<TARGET_FILE:hold_open>")
endif()
