// Counting the kernels a piece of tensor code launches, on the CPU: its operations that are not views or allocations
// (on a device, each one a kernel). For tests that a step's kernels do not grow with the number of parameters.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>

#include <ATen/record_function.h>

namespace dltune {

// The operations `run` calls on this thread that are not views or allocations.
inline int CountKernelOperations(const std::function<void()>& run) {
  static thread_local int counted = 0;
  counted = 0;
  const auto count = [](const at::RecordFunction& function) -> std::unique_ptr<at::ObserverContext> {
    static const std::set<std::string> kViews = {
        "aten::to",     "aten::reshape",    "aten::_reshape_alias", "aten::view",       "aten::narrow",
        "aten::slice",  "aten::select",     "aten::unsqueeze",      "aten::as_strided", "aten::empty",
        "aten::detach", "aten::empty_like", "aten::empty_strided",  "aten::alias",      "aten::expand"};
    if (kViews.count(function.name()) == 0) ++counted;
    return nullptr;
  };
  const at::CallbackHandle handle =
      at::addThreadLocalCallback(at::RecordFunctionCallback(count).scopes({at::RecordScope::FUNCTION}));
  run();
  at::removeCallback(handle);
  return counted;
}

}  // namespace dltune
