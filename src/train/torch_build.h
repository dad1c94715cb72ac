// What the LibTorch this dltune was built against can do, known without loading or initializing it (a runner asks
// before any trial starts, and must not start CUDA in its own process).
#pragma once

namespace dltune {

// Whether that LibTorch has CUDA (CMake found its torch_cuda library): its trainer can train on a GPU.
bool LibTorchHasCuda();

}  // namespace dltune
