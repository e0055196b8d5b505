# Server tests: `bert8 serve` started on 127.0.0.1 by pytest (tests/server/), every route and
# error code, the real TEI clients (huggingface_hub, openai), batching under 64 concurrent
# clients, bad input, slow clients and SIGTERM. Label `server`.
add_test(NAME server_http COMMAND bash ${CMAKE_SOURCE_DIR}/tests/server/run.sh $<TARGET_FILE:bert8_cli>
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(server_http PROPERTIES LABELS server TIMEOUT 900
                     ENVIRONMENT "BERT8_SHARED_DIR=${BERT8_SHARED_DIR};BERT8_TEST_SLOW=$<IF:$<BOOL:${BERT8_SANITIZE}>,4,1>")
