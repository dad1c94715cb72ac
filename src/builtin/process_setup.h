// What a dltune program sets up in its process before it parses its command line: how its OpenMP threads wait, how
// glibc keeps freed memory, the BLAS kernels, and the trial server a worker starts (docs/parallel-layout.md, "A shared
// machine"; docs/training.md, "Memory"; docs/trial-protocol.md, warm trial processes).
#pragma once

namespace dltune {

// Sets the process up for the command `argv[1]`. May restart the program once (exec, the same arguments): OpenMP and
// OpenBLAS read their settings when they load, before main. As `dltune trial-server` with its socket on descriptor 3
// it serves until its worker leaves, then exits, and returns only in each trial process it forks, with `argc`/`argv`
// now the trial's. Call first in main, before any other thread or child process starts.
void SetUpProcess(int& argc, char**& argv);

}  // namespace dltune
