// The part of a new study's reproduction record (core/reproduction.h) that needs the GPU module: the machine's GPUs.
#pragma once

#include "dltune/store/store.h"

namespace dltune {

// `study` with the models of the GPUs this process may use and the driver's version added to its reproduction
// record (NVML; unchanged on a machine without one).
NewStudy WithMachineGpus(NewStudy study);

}  // namespace dltune
