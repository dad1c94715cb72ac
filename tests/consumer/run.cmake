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

# A study run through the library's run API (RunStudy): a command: study of four trials of tests/consumer/trial.sh.
file(MAKE_DIRECTORY ${WORK_DIR}/run_study)
file(WRITE ${WORK_DIR}/run_study/study.yaml "name: consumer_run
command: sh ${SOURCE_DIR}/tests/consumer/trial.sh {x}
run_dir: runs
max_train_steps: 1
objective: {metric: valid/loss, direction: minimize}
trials: 4
space:
  x: {min: 0.0, max: 1.0}
")
execute_process(COMMAND ${WORK_DIR}/build/consumer ${WORK_DIR}/run_study/study.yaml sqlite://${WORK_DIR}/run_study/store.db
                WORKING_DIRECTORY ${WORK_DIR}/run_study RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT result EQUAL 0 OR NOT out MATCHES "consumer_run: completed 4, failed 0, exit status 0")
  message(FATAL_ERROR "RunStudy through the installed library failed (${result}): ${out}\n${err}")
endif()
message(STATUS "consumer run: ${out}")
if(NOT EXISTS ${prefix}/bin/dltune)
  message(FATAL_ERROR "the dltune command was not installed")
endif()
message(STATUS "consumer: ${last_output}")
# The installed dltune finds its trainer module (lib/dltune/trainer.so beside bin/) and trains with it.
run(${prefix}/bin/dltune train synthetic --steps 10 --eval-every 5 --threads 1 --out ${WORK_DIR}/trained)
if(NOT last_output MATCHES "completed 10 steps")
  message(FATAL_ERROR "the installed dltune did not train: ${last_output}")
endif()

# A user's own workload (examples/custom_workload), registered and trained through the installed library.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/custom_workload -B ${WORK_DIR}/custom -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/custom)
run(${WORK_DIR}/custom/two_spirals)
if(NOT last_output MATCHES "two_spirals: best valid error 0\\.0")
  message(FATAL_ERROR "the custom workload did not learn: ${last_output}")
endif()
message(STATUS "custom workload: ${last_output}")

# A user's own training loop in a study through the ask/tell API (examples/ask_tell); a second copy finds nothing
# left to train.
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/ask_tell -B ${WORK_DIR}/ask_tell -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/ask_tell)
file(MAKE_DIRECTORY ${WORK_DIR}/ask_tell_run)
execute_process(COMMAND ${WORK_DIR}/ask_tell/sine_ask_tell ${SOURCE_DIR}/examples/ask_tell/study.yaml
                        sqlite://${WORK_DIR}/ask_tell_run/store.db
                WORKING_DIRECTORY ${WORK_DIR}/ask_tell_run RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT result EQUAL 0 OR NOT out MATCHES "trained 8 trials")
  message(FATAL_ERROR "ask/tell example failed (${result}): ${out}\n${err}")
endif()
string(REGEX MATCHALL "best valid/loss 0\\.0[0-9]+" good "${out}")
list(LENGTH good good_count)
if(good_count LESS 4)
  message(FATAL_ERROR "the ask/tell example did not learn sin(x): ${out}")
endif()
execute_process(COMMAND ${prefix}/bin/dltune show sine_ask_tell --storage sqlite://${WORK_DIR}/ask_tell_run/store.db
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT result EQUAL 0 OR NOT out MATCHES "8 completed")
  message(FATAL_ERROR "dltune show does not see the ask/tell study (${result}): ${out}\n${err}")
endif()
run(${WORK_DIR}/ask_tell/sine_ask_tell ${SOURCE_DIR}/examples/ask_tell/study.yaml
    sqlite://${WORK_DIR}/ask_tell_run/store.db)
if(NOT last_output MATCHES "trained 0 trials")
  message(FATAL_ERROR "a second ask/tell run trained again: ${last_output}")
endif()
message(STATUS "ask/tell: ${out}")
