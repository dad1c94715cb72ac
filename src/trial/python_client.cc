#include "trial/python_client.h"

#include <cstdlib>

#include "trial/trial_process.h"

namespace dltune {
namespace {

bool HoldsClient(const std::filesystem::path& directory) {
  std::error_code error;
  return std::filesystem::is_regular_file(directory / "dltune" / "__init__.py", error);
}

}  // namespace

std::optional<std::filesystem::path> PythonClientDirectory() {
  const std::filesystem::path installed = SelfExecutable().parent_path().parent_path() / "share" / "dltune" / "python";
  if (HoldsClient(installed)) return installed;
#ifdef DLTUNE_PYTHON_SOURCE_DIR
  if (HoldsClient(DLTUNE_PYTHON_SOURCE_DIR)) return std::filesystem::path(DLTUNE_PYTHON_SOURCE_DIR);
#endif
  return std::nullopt;
}

std::optional<std::string> PythonPathWithClient() {
  const auto directory = PythonClientDirectory();
  if (!directory) return std::nullopt;
  const char* inherited = std::getenv("PYTHONPATH");
  if (inherited == nullptr || *inherited == '\0') return directory->string();
  return directory->string() + ":" + inherited;
}

}  // namespace dltune
