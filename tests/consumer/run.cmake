# Installs the built tree into a scratch prefix, builds tests/consumer and examples/custom_workload against it with
# find_package(dltune), runs them and checks what they print. Run by CTest (install_and_find_package).
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "failed (${result}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${prefix})
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer ${SOURCE_DIR}/examples/quickstart.yaml)
if(NOT last_output MATCHES "quickstart has 32 trials; trial 0:.* optimizer=nesterov")
  message(FATAL_ERROR "unexpected consumer output: ${last_output}")
endif()
if(NOT EXISTS ${prefix}/bin/dltune)
  message(FATAL_ERROR "the dltune command was not installed")
endif()
message(STATUS "consumer: ${last_output}")

# A user's own workload (examples/custom_workload), registered and trained through the installed library.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/custom_workload -B ${WORK_DIR}/custom -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/custom)
run(${WORK_DIR}/custom/two_spirals)
if(NOT last_output MATCHES "two_spirals: best valid error 0\\.0")
  message(FATAL_ERROR "the custom workload did not learn: ${last_output}")
endif()
message(STATUS "custom workload: ${last_output}")
