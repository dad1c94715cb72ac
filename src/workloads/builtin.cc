#include "builtin.h"

namespace dltune::internal {

void RegisterBuiltinWorkloads(std::map<std::string, WorkloadFactory>& factories) { (void)factories; }

}  // namespace dltune::internal
