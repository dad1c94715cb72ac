#include "dltune/train/threads.h"

#include <torch/torch.h>

namespace dltune {

void SetTorchThreads(int threads) {
  torch::set_num_threads(threads);
  torch::set_num_interop_threads(1);
}

}  // namespace dltune
