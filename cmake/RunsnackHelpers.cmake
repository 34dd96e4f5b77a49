# One helper per kind of target, so every layer registers the same way.

# runsnack_library(NAME SOURCES... DEPS ...): a layer library `runsnack_NAME`.
function(runsnack_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(runsnack_${name} STATIC ${ARG_SOURCES})
  target_include_directories(runsnack_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(runsnack_${name} PUBLIC ${ARG_DEPS})
endfunction()

# runsnack_test(NAME SOURCES... DEPS ...): a GoogleTest binary registered with CTest.
function(runsnack_test name)
  if(RUNSNACK_FUZZ)
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS unit TIMEOUT 120)
endfunction()

# runsnack_fuzzer(NAME SOURCE DEPS ...): a libFuzzer target, built only with RUNSNACK_FUZZ=ON.
function(runsnack_fuzzer name)
  if(NOT RUNSNACK_FUZZ)
    return()
  endif()
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
endfunction()
