# Replays of the fuzz harnesses (fuzz/*.c) with an ordinary main (fuzz/replay_main.c): every
# seed in fuzz/corpus/<name>/ and every input of a fixed crash in fuzz/regressions/<name>/ runs
# through the harness and its invariant checks in the normal suite (label unit), under ASan and
# UBSan in the sanitizer build. <name> is the harness name without "fuzz_".
file(GLOB BERT8_FUZZ_HARNESSES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/fuzz/fuzz_*.c)
foreach(src ${BERT8_FUZZ_HARNESSES})
  get_filename_component(h ${src} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" name ${h})
  add_executable(replay_${name} ${src} ${CMAKE_SOURCE_DIR}/fuzz/replay_main.c)
  target_link_libraries(replay_${name} PRIVATE bert8_testutil)
  target_include_directories(replay_${name} PRIVATE ${CMAKE_SOURCE_DIR}/tools)
  add_test(NAME fuzz_replay_${name}
           COMMAND replay_${name} ${CMAKE_SOURCE_DIR}/fuzz/corpus/${name}
                   ${CMAKE_SOURCE_DIR}/fuzz/regressions/${name}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(fuzz_replay_${name} PROPERTIES LABELS unit)
endforeach()
if(TARGET replay_text_io)
  target_sources(replay_text_io PRIVATE ${CMAKE_SOURCE_DIR}/tools/text_io.c)
endif()
if(TARGET replay_jsonl)
  target_sources(replay_jsonl PRIVATE ${CMAKE_SOURCE_DIR}/tools/text_io.c ${CMAKE_SOURCE_DIR}/tools/text_runner.c
                 ${CMAKE_SOURCE_DIR}/tools/cli_util.c)
endif()
if(TARGET replay_server_http)
  file(GLOB BERT8_REPLAY_SERVER_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/server/*.c)
  target_sources(replay_server_http PRIVATE ${BERT8_REPLAY_SERVER_SOURCES})
  target_include_directories(replay_server_http PRIVATE ${CMAKE_SOURCE_DIR}/server)
  target_link_libraries(replay_server_http PRIVATE PkgConfig::MHD Threads::Threads)
endif()
