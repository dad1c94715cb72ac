# dltune_module(NAME [TORCH] DEPS <targets...>)
# include/dltune/<NAME>/ holds the module's public headers (installed); src/<NAME>/*.h its internal ones.
# Builds src/<NAME>/*.cc (except *_test.cc and *_fuzz.cc) into the static library dltune_<NAME>,
# and src/<NAME>/*_test.cc into the GoogleTest executable dltune_<NAME>_test (CTest label `unit`).
# TORCH modules (train, workloads) precompile <torch/torch.h> and build one test executable per *_test.cc, so a
# change to one test recompiles only that file.
function(dltune_module name)
  cmake_parse_arguments(ARG "TORCH" "" "DEPS;TEST_DEPS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  list(FILTER sources EXCLUDE REGEX "_(test|fuzz)\\.cc$")
  set(target dltune_${name})
  add_library(${target} STATIC ${sources})
  add_library(dltune::${name} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  # A module's headers are seen only by what links it (itself, the modules whose DEPS name it, directly or through
  # others, and the CLI, tests and benchmarks): an include of a module that is not among them fails to build. Its
  # include root in the build tree holds two links, <NAME> to src/<NAME> (the internal headers, "run/worker.h", never
  # installed) and dltune/<NAME> to include/dltune/<NAME> (the public ones, "dltune/run/run_study.h").
  dltune_include_root(${name} ${CMAKE_CURRENT_SOURCE_DIR} root)
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${root}>
                                              $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(${target} PUBLIC ${ARG_DEPS})
  dltune_warnings(${target})
  if(ARG_TORCH)
    target_precompile_headers(${target} PRIVATE <torch/torch.h>)
  endif()

  if(DLTUNE_BUILD_TESTS AND ARG_TORCH)
    file(GLOB tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cc)
    foreach(test_source ${tests})
      get_filename_component(test_name ${test_source} NAME_WE)
      set(test_target dltune_${name}_${test_name})
      add_executable(${test_target} ${test_source})
      target_link_libraries(${test_target} PRIVATE ${target} ${ARG_TEST_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
      target_compile_definitions(${test_target} PRIVATE DLTUNE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
      # Reusing the library's precompiled header needs the same code model: -fPIC rather than an executable's -fPIE.
      set_target_properties(${test_target} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
      target_compile_options(${test_target} PRIVATE -fPIC)
      target_precompile_headers(${test_target} REUSE_FROM ${target})
      dltune_warnings(${test_target})
      gtest_discover_tests(${test_target} PROPERTIES LABELS unit DISCOVERY_TIMEOUT 120)
      if(test_name MATCHES "^cuda_")
        # cuda_*_test.cc need a CUDA device (they skip without one): their tests are also labelled gpu, for
        # `ctest -L gpu`, once discovery has listed them (in ${test_target}_TESTS).
        set(label_script ${CMAKE_CURRENT_BINARY_DIR}/${test_target}_gpu_label.cmake)
        file(WRITE ${label_script}
             "if(${test_target}_TESTS)\n  set_tests_properties(\${${test_target}_TESTS} PROPERTIES LABELS \"unit;gpu\")\nendif()\n")
        set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${label_script})
      endif()
    endforeach()
  elseif(DLTUNE_BUILD_TESTS)
    file(GLOB tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cc)
    if(tests)
      add_executable(${target}_test ${tests})
      target_link_libraries(${target}_test PRIVATE ${target} ${ARG_TEST_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
      target_compile_definitions(${target}_test PRIVATE DLTUNE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
      dltune_warnings(${target}_test)
      gtest_discover_tests(${target}_test PROPERTIES LABELS unit DISCOVERY_TIMEOUT 60)
    endif()
  endif()
endfunction()

# The include root of module `name` in the build tree (returned in `out`): <name> linked to `source_dir`, and
# dltune/<name> to include/dltune/<name> where the module has public headers.
function(dltune_include_root name source_dir out)
  set(root ${PROJECT_BINARY_DIR}/module_include/${name})
  file(MAKE_DIRECTORY ${root}/dltune)
  file(CREATE_LINK ${source_dir} ${root}/${name} SYMBOLIC)
  if(IS_DIRECTORY ${PROJECT_SOURCE_DIR}/include/dltune/${name})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/include/dltune/${name} ${root}/dltune/${name} SYMBOLIC)
  endif()
  set(${out} ${root} PARENT_SCOPE)
endfunction()

# Warnings for every project target; errors in the dev preset (DLTUNE_WERROR).
function(dltune_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
    # Value structs with defaults are filled with designated initializers, naming only what differs.
    -Wno-missing-field-initializers)
  if(DLTUNE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(DLTUNE_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all)
    # PUBLIC: whatever links these static libraries (tests, a consumer of the installed tree) needs the runtime too.
    target_link_options(${target} PUBLIC -fsanitize=address,undefined)
  endif()
endfunction()
