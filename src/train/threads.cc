#include "threads.h"

#include <mutex>

#include <torch/torch.h>

#include "core/machine.h"

namespace dltune {

void SetTorchThreads(int threads) {
  torch::set_num_threads(threads > 0 ? threads : IdleCores());
  // LibTorch allows setting the inter-op pool only once, before it is used.
  static std::once_flag interop_once;
  std::call_once(interop_once, [] {
    try {
      torch::set_num_interop_threads(1);
    } catch (const c10::Error&) {
      // Already in use: keep its size.
    }
  });
}

}  // namespace dltune
