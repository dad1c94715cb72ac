// How many threads LibTorch may use in this process.
#pragma once

namespace dltune {

// Sets LibTorch's intra-op threads to `threads` (several trials share a machine: one thread each by default in
// studies) — every core available when `threads` is 0 (auto, outside a study) — and its inter-op pool to one
// thread. Call before any tensor work.
void SetTorchThreads(int threads);

}  // namespace dltune
