// Counting the kernels a piece of tensor code launches, on the CPU: its operations that are not views or allocations
// (on a device, each one a kernel). For tests that a step's kernels do not grow with the number of parameters or
// members.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>

namespace dltune {

// The operations that make no kernel: views, allocations and the metadata of a tensor.
inline bool IsViewOrAllocation(const std::string& name) {
  static const std::set<std::string> kViews = {
      "aten::to",         "aten::reshape",    "aten::_reshape_alias", "aten::view",       "aten::narrow",
      "aten::slice",      "aten::select",     "aten::unsqueeze",      "aten::as_strided", "aten::empty",
      "aten::detach",     "aten::empty_like", "aten::empty_strided",  "aten::alias",      "aten::expand",
      "aten::transpose",  "aten::t",          "aten::permute",        "aten::flatten",    "aten::squeeze",
      "aten::view_as",    "aten::expand_as",  "aten::_unsafe_view",   "aten::resize_",    "aten::set_",
      "aten::lift_fresh", "aten::unflatten",  "aten::detach_",        "aten::reshape_as", "aten::contiguous",
      "aten::movedim",    "aten::split",      "aten::chunk",          "aten::unbind",     "aten::diagonal"};
  return kViews.count(name) > 0;
}

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

// While it lives, counts the kernels of the operations this thread calls: each aten operation that has a CPU kernel
// of its own, once, whatever it calls inside (how the CPU's kernel works, which a device's does otherwise: the CPU's
// baddbmm runs one addmm per batch entry, a device's one batched product), and each operation without one (a
// composite, such as cross_entropy) as the kernels it calls, or once where it calls none (copy_). Views, allocations
// and no-ops are none. count() may be read between two operations; one counter per thread at a time.
class KernelCounter {
 public:
  KernelCounter() {
    State() = {};
    handle_ = at::addThreadLocalCallback(
        at::RecordFunctionCallback(&KernelCounter::Enter, &KernelCounter::Leave).scopes({at::RecordScope::FUNCTION}));
  }
  ~KernelCounter() { at::removeCallback(handle_); }
  KernelCounter(const KernelCounter&) = delete;
  KernelCounter& operator=(const KernelCounter&) = delete;

  // The kernels counted so far, and their operations' names in order.
  int count() const { return static_cast<int>(State().names.size()); }
  const std::vector<std::string>& names() const { return State().names; }

 private:
  // An operation under way.
  struct Call {
    bool own_kernel = false;     // it has a CPU kernel: counted once
    bool inside_kernel = false;  // called by an operation that has one: not counted
    bool calls_another = false;  // it called an operation that may run a kernel
  };
  struct Counts {
    std::vector<Call> calls;  // outermost first
    std::vector<std::string> names;
  };
  static Counts& State() {
    static thread_local Counts counts;
    return counts;
  }
  // Whether the operation may run a kernel: an aten one (not the autograd engine's spans), not a view or no-op.
  static bool MayRunKernel(const std::string& name) {
    return name.rfind("aten::", 0) == 0 && !IsViewOrAllocation(name) && name != "aten::resolve_conj" &&
           name != "aten::resolve_neg" && name != "aten::_conj";
  }
  static bool HasCpuKernel(const at::RecordFunction& function) {
    const auto name = function.operator_name();
    if (!name) return false;
    const auto op = c10::Dispatcher::singleton().findOp(*name);
    return op && op->hasKernelForDispatchKey(c10::DispatchKey::CPU);
  }
  static std::unique_ptr<at::ObserverContext> Enter(const at::RecordFunction& function) {
    Counts& counts = State();
    const bool may = MayRunKernel(function.name());
    Call call{.own_kernel = may && HasCpuKernel(function)};
    if (!counts.calls.empty()) {
      Call& parent = counts.calls.back();
      parent.calls_another = parent.calls_another || may;
      call.inside_kernel = parent.inside_kernel || parent.own_kernel;
    }
    counts.calls.push_back(call);
    return nullptr;
  }
  static void Leave(const at::RecordFunction& function, at::ObserverContext* /*context*/) {
    Counts& counts = State();
    if (counts.calls.empty()) return;  // entered before the counter was made
    const Call call = counts.calls.back();
    counts.calls.pop_back();
    if (call.inside_kernel) return;
    if (call.own_kernel || (!call.calls_another && MayRunKernel(function.name()))) {
      counts.names.emplace_back(function.name());
    }
  }

  at::CallbackHandle handle_ = 0;
};

}  // namespace dltune
