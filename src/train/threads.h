// How many threads LibTorch may use in this process.
#pragma once

namespace dltune {

// Sets LibTorch's intra-op threads to `threads` (several trials share a machine: one thread each by default in
// studies) — when `threads` is 0 (auto, outside a study), the cores other processes leave idle now (IdleCores: on a
// busy machine a thread that waits for a descheduled partner at every parallel region costs more than it brings) —
// and its inter-op pool to one thread. Call before any tensor work.
void SetTorchThreads(int threads);

}  // namespace dltune
