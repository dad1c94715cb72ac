# A dltune built without its trainer (DLTUNE_TRAINER=OFF): configures a second build tree beside this one with the
# same compiler and flags (ccache then finds most of its objects), builds the dltune command, checks that nothing of
# LibTorch went into it, runs a command: study end to end and checks that a built-in workload is refused saying why.
# Run by CTest (no_trainer_build) with SOURCE_DIR, BINARY_DIR (the second tree), WORK_DIR, CXX, BUILD_TYPE, WERROR,
# SANITIZE and GENERATOR.
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "failed (${result}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

string(TIMESTAMP start "%s")
run(${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BINARY_DIR} -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX}
    -DCMAKE_BUILD_TYPE=${BUILD_TYPE} -DDLTUNE_WERROR=${WERROR} -DDLTUNE_SANITIZE=${SANITIZE} -DDLTUNE_TRAINER=OFF
    -DDLTUNE_BUILD_TESTS=OFF -DDLTUNE_BUILD_BENCH=OFF)
string(TIMESTAMP configured "%s")
run(${CMAKE_COMMAND} --build ${BINARY_DIR} --target dltune_cli)
string(TIMESTAMP built "%s")
math(EXPR configure_seconds "${configured} - ${start}")
math(EXPR build_seconds "${built} - ${configured}")
message(STATUS "no-trainer build: configured in ${configure_seconds} s, dltune built in ${build_seconds} s")

# Nothing of LibTorch: Torch never looked for, no trainer source compiled, no LibTorch library linked, no module.
file(STRINGS ${BINARY_DIR}/CMakeCache.txt torch_entries REGEX "^Torch_DIR")
if(torch_entries)
  message(FATAL_ERROR "DLTUNE_TRAINER=OFF still looked for LibTorch: ${torch_entries}")
endif()
file(READ ${BINARY_DIR}/compile_commands.json commands)
if(commands MATCHES "src/(train|workloads)/|torch/csrc")
  message(FATAL_ERROR "DLTUNE_TRAINER=OFF compiled trainer sources or with LibTorch's headers: ${CMAKE_MATCH_0}")
endif()
set(dltune ${BINARY_DIR}/bin/dltune)
run(ldd ${dltune})
if(last_output MATCHES "libtorch|libc10")
  message(FATAL_ERROR "DLTUNE_TRAINER=OFF linked LibTorch:\n${last_output}")
endif()
file(GLOB_RECURSE modules ${BINARY_DIR}/lib*/trainer.so)
if(modules)
  message(FATAL_ERROR "DLTUNE_TRAINER=OFF built a trainer module: ${modules}")
endif()

# A command: study end to end: four trials of tests/consumer/trial.sh, all completed.
file(WRITE ${WORK_DIR}/study.yaml "name: no_trainer
command: sh ${SOURCE_DIR}/tests/consumer/trial.sh {x}
max_train_steps: 1
objective: {metric: valid/loss, direction: minimize}
trials: 4
space:
  x: {min: 0.0, max: 1.0}
")
set(storage --storage sqlite://${WORK_DIR}/store.db)
execute_process(COMMAND ${dltune} run study.yaml --no-report ${storage} WORKING_DIRECTORY ${WORK_DIR}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "dltune run of a command: study failed (${result}): ${out}\n${err}")
endif()
run(${dltune} studies ${storage})
if(NOT last_output MATCHES "no_trainer +4 done")
  message(FATAL_ERROR "the command: study did not complete its 4 trials:\n${last_output}")
endif()

# A built-in workload is refused, saying that this dltune has no trainer and that command: studies need none.
file(WRITE ${WORK_DIR}/builtin.yaml "name: builtin
workload: synthetic
max_train_steps: 10
trials: 1
space: {learning_rate: {min: 0.01, max: 1, scale: log}}
")
foreach(command "run;builtin.yaml;--no-report;${storage}" "train;synthetic;--steps;5;--out;trained")
  execute_process(COMMAND ${dltune} ${command} WORKING_DIRECTORY ${WORK_DIR}
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT result EQUAL 2 OR NOT err MATCHES "this dltune was built without its trainer \\(DLTUNE_TRAINER=OFF\\)"
     OR NOT err MATCHES "command: programs do not")
    message(FATAL_ERROR "dltune ${command} in a dltune without its trainer (${result}): ${out}\n${err}")
  endif()
  if(command MATCHES "^run" AND NOT err MATCHES "builtin.yaml:2:[0-9]+: workload 'synthetic' cannot train")
    message(FATAL_ERROR "dltune ${command} without its trainer names no place in the spec: ${err}")
  endif()
endforeach()
message(STATUS "no-trainer dltune: a command: study ran, a built-in workload was refused")
