# LibTorch for the trainer (DLTUNE_TRAINER): the system's, or with DLTUNE_TORCH_FROM_PYTHON a Python torch's, and
# what it offers (CUDA graphs, NCCL). Included by the top-level CMakeLists.txt.
# DLTUNE_TORCH_FROM_PYTHON: build against the LibTorch of the torch installed for DLTUNE_PYTHON (a pip torch with
# CUDA, as a GPU machine has it) instead of the system's (Debian's libtorch-dev, CPU only). The `cuda` preset sets it.
option(DLTUNE_TORCH_FROM_PYTHON "Use the LibTorch of DLTUNE_PYTHON's torch (torch.utils.cmake_prefix_path)" OFF)
set(DLTUNE_PYTHON "python3" CACHE STRING "The interpreter whose torch DLTUNE_TORCH_FROM_PYTHON builds against")
if(DLTUNE_TORCH_FROM_PYTHON)
  execute_process(
    COMMAND ${DLTUNE_PYTHON} -c "import torch; print(torch.utils.cmake_prefix_path); print(int(torch.compiled_with_cxx11_abi())); print(torch.__version__)"
    OUTPUT_VARIABLE python_torch OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE python_torch_status)
  if(NOT python_torch_status EQUAL 0)
    message(FATAL_ERROR "DLTUNE_TORCH_FROM_PYTHON: ${DLTUNE_PYTHON} cannot import torch (set DLTUNE_PYTHON to an "
                        "interpreter that can)")
  endif()
  string(REPLACE "\n" ";" python_torch "${python_torch}")
  list(GET python_torch 0 python_torch_prefix)
  list(GET python_torch 1 python_torch_cxx11_abi)
  list(GET python_torch 2 python_torch_version)
  if(NOT python_torch_cxx11_abi)
    # The system's libraries (yaml-cpp, fmt, spdlog, ...) use the C++11 ABI; a torch built without it cannot link.
    message(FATAL_ERROR "DLTUNE_TORCH_FROM_PYTHON: ${DLTUNE_PYTHON}'s torch ${python_torch_version} was built "
                        "without the C++11 ABI; install a torch built with it (pip's torch since 2.7, or its "
                        "cxx11-abi builds)")
  endif()
  message(STATUS "LibTorch of ${DLTUNE_PYTHON}'s torch ${python_torch_version}: ${python_torch_prefix}")
  list(PREPEND CMAKE_PREFIX_PATH "${python_torch_prefix}")
endif()
find_package(Torch REQUIRED)
# A pip torch (its headers outside the system's include directories) needs two things of a program that links it,
# where Debian's LibTorch needs neither:
# - it ships a newer fmt than the system's, in the include directory of its own headers, where it comes before the
#   system's fmt: files that include torch then compile against it and must use it header-only, as torch does, or
#   they reference functions that only a libfmt of that version would define;
# - its libraries export parts of libstdc++ that they link statically (std::filesystem among them, in torch 2.11 too:
#   pytorch/pytorch#133437). Listed before libstdc++ among a program's libraries, they take the program's calls, and
#   their std::filesystem::remove_all jumps to address 0. libstdc++ is asked for first here, but on the GPU machine
#   (CMake 4.4) the binaries still listed libtorch.so first and bound their std::filesystem calls to it: dltune never
#   calls remove_all (core/files.h's RemoveTree instead, a rule tests/source_rules_test.cc keeps), and the others
#   worked there.
foreach(torch_include_dir ${TORCH_INCLUDE_DIRS})
  if(EXISTS "${torch_include_dir}/fmt/format-inl.h" AND NOT torch_include_dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
    message(STATUS "A pip LibTorch (${torch_include_dir}): its fmt header-only, libstdc++ before it")
    set_property(TARGET torch APPEND PROPERTY INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY)
    set_property(TARGET torch APPEND PROPERTY INTERFACE_LINK_OPTIONS "LINKER:--push-state,--no-as-needed,-lstdc++,--pop-state")
    break()
  endif()
endforeach()
# A LibTorch with CUDA (a pip torch on a GPU machine) can capture CUDA graphs (src/train/cuda_graph.cc); Debian's,
# CPU only, cannot, and that file then builds a stand-in that says so. DLTUNE_CUDA_GRAPHS=OFF builds the stand-in
# anyway.
option(DLTUNE_CUDA_GRAPHS "Capture fused steps in CUDA graphs where LibTorch has CUDA" ON)
if(DLTUNE_CUDA_GRAPHS AND TARGET torch_cuda)
  set(DLTUNE_WITH_CUDA_GRAPHS ON)
  message(STATUS "CUDA graphs: on (LibTorch has CUDA)")
endif()
# NCCL for data-parallel ranks on GPUs of their own (src/train/data_parallel.cc), where LibTorch has it (torch_cuda
# defines USE_C10D_NCCL) and nccl.h is found: a pip torch's nvidia NCCL package, or the system's. Elsewhere ranks on
# GPUs all-reduce over Gloo. DLTUNE_NCCL=OFF leaves NCCL out.
option(DLTUNE_NCCL "All-reduce data-parallel ranks' CUDA tensors over NCCL where LibTorch has it" ON)
if(DLTUNE_NCCL AND TARGET torch_cuda)
  get_target_property(torch_cuda_definitions torch_cuda INTERFACE_COMPILE_DEFINITIONS)
  if("USE_C10D_NCCL" IN_LIST torch_cuda_definitions)
    execute_process(COMMAND ${DLTUNE_PYTHON} ${PROJECT_SOURCE_DIR}/cmake/nccl_include_dirs.py
      OUTPUT_VARIABLE nccl_hints OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    find_path(DLTUNE_NCCL_INCLUDE_DIR nccl.h HINTS ${nccl_hints} ${TORCH_INCLUDE_DIRS})
    if(DLTUNE_NCCL_INCLUDE_DIR)
      set(DLTUNE_WITH_NCCL ON)
      message(STATUS "NCCL: on (${DLTUNE_NCCL_INCLUDE_DIR}/nccl.h)")
    else()
      message(STATUS "NCCL: off (LibTorch has it, but no nccl.h was found): data-parallel GPUs use Gloo")
    endif()
  endif()
endif()
