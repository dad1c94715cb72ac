#include "torch_build.h"

namespace dltune {

bool LibTorchHasCuda() {
#ifdef DLTUNE_TORCH_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace dltune
