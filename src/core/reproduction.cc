#include "core/reproduction.h"

#include <dlfcn.h>
#include <sys/utsname.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "core/machine.h"
#include "core/sha256.h"
#include "core/strings.h"
#include "dltune/core/error.h"
#include "dltune/version.h"

extern char** environ;  // NOLINT(readability-identifier-naming): POSIX's name

namespace dltune {
namespace {

using nlohmann::json;

// What `command` writes to its standard output, byte for byte; nullopt when it cannot run or exits with a failure.
std::optional<std::string> OutputOf(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string output;
  std::array<char, 65536> buffer{};
  for (std::size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) output.append(buffer.data(), n);
  if (pclose(pipe) != 0) return std::nullopt;
  return output;
}

std::string Git(const std::filesystem::path& directory) {
  // Settings of the user's that change what git prints are overridden, so the output is the same everywhere.
  return "git -C " + ShellQuote(directory.string()) + " -c core.quotepath=off --no-pager ";
}

std::string Trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

// A remote's URL without the user and password an https URL may carry.
std::string WithoutCredentials(const std::string& url) {
  const std::size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url;
  const std::size_t at = url.find('@', scheme + 3);
  const std::size_t slash = url.find('/', scheme + 3);
  if (at == std::string::npos || (slash != std::string::npos && slash < at)) return url;
  return url.substr(0, scheme + 3) + url.substr(at + 1);
}

// Whether `bytes` is UTF-8 text a database's TEXT column holds as it is: valid UTF-8 without NUL bytes.
bool IsStorableText(const std::string& bytes) {
  return bytes.find('\0') == std::string::npos && SanitizeUtf8(bytes) == bytes;
}

constexpr char kBase64Alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string Base64Encode(const std::string& bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t chunk = static_cast<unsigned char>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) chunk |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) chunk |= static_cast<unsigned char>(bytes[i + 2]);
    out += kBase64Alphabet[(chunk >> 18) & 63];
    out += kBase64Alphabet[(chunk >> 12) & 63];
    out += i + 1 < bytes.size() ? kBase64Alphabet[(chunk >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kBase64Alphabet[chunk & 63] : '=';
  }
  return out;
}

std::string Base64Decode(const std::string& text) {
  std::string out;
  std::uint32_t chunk = 0;
  int bits = 0;
  for (const char c : text) {
    if (c == '=') break;
    const char* at = std::strchr(kBase64Alphabet, c);
    if (at == nullptr || c == '\0') throw CorruptError("the stored patch is not base64");
    chunk = (chunk << 6) | static_cast<std::uint32_t>(at - kBase64Alphabet);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((chunk >> bits) & 0xff);
    }
  }
  return out;
}

std::string PatchCommand(const std::filesystem::path& directory) {
  return Git(directory) +
         "diff --binary --no-color --no-ext-diff --no-textconv --no-relative --src-prefix=a/ --dst-prefix=b/ HEAD -- "
         "2>/dev/null";
}

// The patch's size and SHA-256, and its bytes when they are at most `cap` (a larger patch is read through, never
// held whole); nullopt when git cannot make it.
struct ReadPatch {
  std::size_t size = 0;
  std::string sha256;
  std::optional<std::string> bytes;
};
std::optional<ReadPatch> ReadPatchOf(const std::filesystem::path& directory, std::size_t cap) {
  FILE* pipe = popen(PatchCommand(directory).c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  ReadPatch patch;
  patch.bytes.emplace();
  Sha256 hash;
  std::array<char, 65536> buffer{};
  for (std::size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) {
    hash.Update(std::string_view(buffer.data(), n));
    patch.size += n;
    if (patch.size > cap) {
      patch.bytes.reset();
    } else {
      patch.bytes->append(buffer.data(), n);
    }
  }
  if (pclose(pipe) != 0) return std::nullopt;
  patch.sha256 = hash.HexDigest();
  return patch;
}

// The patch entry of the record, and the patch as stored.
json PatchEntry(const std::filesystem::path& directory, std::size_t cap, std::string* stored) {
  const std::optional<ReadPatch> read = ReadPatchOf(directory, cap);
  if (!read) return {{"note", "git could not make the patch of uncommitted changes"}};
  json entry = {{"bytes", read->size}, {"sha256", read->sha256}};
  if (!read->bytes) {
    entry["stored"] = false;
    entry["note"] = fmt::format(
        "the patch of uncommitted changes is {} ({} bytes), over the {} dltune keeps: not stored; commit the changes "
        "to reproduce the study",
        ByteSizeText(read->size), read->size, ByteSizeText(cap));
    return entry;
  }
  const std::string* patch = &*read->bytes;
  entry["stored"] = true;
  const bool text = IsStorableText(*patch);
  entry["encoding"] = text ? "text" : "base64";
  *stored = text ? *patch : Base64Encode(*patch);
  return entry;
}

json GitEntry(const std::filesystem::path& directory, std::size_t cap, std::string* stored) {
  json git = json::object();
  if (const auto prefix = OutputOf(Git(directory) + "rev-parse --show-prefix 2>/dev/null")) {
    git["prefix"] = Trimmed(*prefix);
  }
  if (const auto remote = OutputOf(Git(directory) + "remote get-url origin 2>/dev/null")) {
    std::string url = WithoutCredentials(SanitizeUtf8(Trimmed(*remote)));
    // A remote that is a relative path is relative to the checkout's root: made absolute, it clones from anywhere.
    const auto top = OutputOf(Git(directory) + "rev-parse --show-toplevel 2>/dev/null");
    if (top && !url.empty() && url.find(':') == std::string::npos && url.front() != '/') {
      url = (std::filesystem::path(Trimmed(*top)) / url).lexically_normal().string();
    }
    git["remote"] = url;
  }
  git["patch"] = PatchEntry(directory, cap, stored);
  if (const auto others =
          OutputOf(Git(directory) + "ls-files --others --exclude-standard --full-name -z -- :/ 2>/dev/null")) {
    constexpr std::size_t kListed = 50;
    json untracked = json::array();
    std::size_t more = 0;
    for (std::size_t start = 0; start < others->size();) {
      std::size_t end = others->find('\0', start);
      if (end == std::string::npos) end = others->size();
      if (untracked.size() < kListed) {
        untracked.push_back(SanitizeUtf8(others->substr(start, end - start)));
      } else {
        ++more;
      }
      start = end + 1;
    }
    git["untracked"] = untracked;
    if (more > 0) git["untracked_more"] = more;
  }
  return git;
}

std::string OsText() {
  utsname name{};
  if (::uname(&name) != 0) return "";
  return fmt::format("{} {} {} {}", name.sysname, name.release, name.version, name.machine);
}

// The path of a loaded library whose file name starts with one of `names`; "" when none is loaded.
std::string LoadedLibrary(std::initializer_list<const char*> names) {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    const std::size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::filesystem::path path = line.substr(slash);
    const std::string file = path.filename().string();
    for (const char* name : names) {
      if (file.starts_with(name)) return path.string();
    }
  }
  return "";
}

// LibTorch's version from its library's path: the file's version suffix (libtorch_cpu.so.1.13), or the version.py of
// a Python torch beside its lib/ folder.
std::string LibTorchVersion(const std::filesystem::path& library) {
  std::ifstream version_py(library.parent_path().parent_path() / "version.py");
  for (std::string line; std::getline(version_py, line);) {
    if (!line.starts_with("__version__")) continue;
    const std::size_t open = line.find_first_of("'\"");
    const std::size_t close = open == std::string::npos ? open : line.find(line[open], open + 1);
    if (close != std::string::npos) return line.substr(open + 1, close - open - 1);
  }
  const std::string file = library.filename().string();
  const std::size_t so = file.find(".so.");
  return so == std::string::npos ? library.string() : file.substr(so + 4) + " (" + library.string() + ")";
}

template <typename Function>
Function LoadedFunction(const char* name) {
  return reinterpret_cast<Function>(::dlsym(RTLD_DEFAULT, name));  // NOLINT: dlsym's documented use
}

std::string CudaVersionText(int version) { return fmt::format("{}.{}", version / 1000, (version % 1000) / 10); }

bool KernelVariable(const std::string& name) {
  static const std::array<const char*, 7> kPrefixes = {"OPENBLAS_", "GOTO",   "MKL_",       "KMP_",
                                                       "CUBLAS_",   "CUDNN_", "NVIDIA_TF32"};
  static const std::array<const char*, 14> kNames = {
      "OMP_NUM_THREADS",   "OMP_DYNAMIC",           "OMP_PROC_BIND",
      "OMP_SCHEDULE",      "CUDA_VISIBLE_DEVICES",  "CUDA_LAUNCH_BLOCKING",
      "CUDA_DEVICE_ORDER", "PYTHONHASHSEED",        "DLTUNE_BLAS_KERNELS",
      "DLTUNE_THREADS",    "DLTUNE_TRAINER_MODULE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
      "XLA_FLAGS",         "TF_DETERMINISTIC_OPS"};
  if (name == "OPENBLAS_VERBOSE") return false;  // what it prints, not what it computes
  for (const char* prefix : kPrefixes) {
    if (name.starts_with(prefix)) return true;
  }
  for (const char* exact : kNames) {
    if (name == exact) return true;
  }
  return false;
}

}  // namespace

std::string ByteSizeText(std::size_t bytes) {
  if (bytes < 1024) return fmt::format("{} bytes", bytes);
  if (bytes < std::size_t{1} << 20) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

std::optional<std::string> GitPatchOf(const std::filesystem::path& directory) {
  return OutputOf(PatchCommand(directory));
}

nlohmann::json ProcessRuntime() {
  json runtime = {{"dltune", fmt::format("{} ({})", kVersion, kBuildCommit)}};
  if (const std::string torch = LoadedLibrary({"libtorch_cpu.so"}); !torch.empty()) {
    runtime["libtorch"] = LibTorchVersion(torch);
  }
  using TextFunction = char* (*)();
  if (const auto config = LoadedFunction<TextFunction>("openblas_get_config")) {
    runtime["blas"] = std::string(config());
    if (const auto core = LoadedFunction<TextFunction>("openblas_get_corename")) runtime["blas_kernels"] = core();
  } else if (const std::string blas = LoadedLibrary({"libopenblas", "libmkl_rt", "libblis", "libblas"});
             !blas.empty()) {
    runtime["blas"] = blas;
  }
  using VersionFunction = int (*)(int*);
  int version = 0;
  if (const auto cudart = LoadedFunction<VersionFunction>("cudaRuntimeGetVersion"); cudart && cudart(&version) == 0) {
    runtime["cuda_runtime"] = CudaVersionText(version);
  }
  if (const auto driver = LoadedFunction<VersionFunction>("cudaDriverGetVersion"); driver && driver(&version) == 0) {
    runtime["cuda_driver"] = CudaVersionText(version);
  }
  return runtime;
}

nlohmann::json KernelEnvironment() {
  json variables = json::object();
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const std::size_t equals = text.find('=');
    if (equals == std::string::npos) continue;
    const std::string name = text.substr(0, equals);
    if (KernelVariable(name)) variables[name] = SanitizeUtf8(text.substr(equals + 1));
  }
  return variables;
}

ReproductionCapture CaptureReproduction(const std::filesystem::path& directory, std::size_t patch_cap) {
  ReproductionCapture capture;
  json record = json::object();
  record["dltune"] = {{"version", kVersion}, {"build", kBuildCommit}};
  record["os"] = OsText();
  record["cpu"] = CpuModelName();
  json libraries = ProcessRuntime();
  libraries.erase("dltune");
  record["libraries"] = libraries;
  record["environment"] = KernelEnvironment();
  if (OutputOf(Git(directory) + "rev-parse --git-dir >/dev/null 2>&1")) {
    record["git"] = GitEntry(directory, patch_cap, &capture.stored_patch);
  }
  capture.record = record.dump();
  return capture;
}

std::string WithGpus(const std::string& record, const std::vector<std::string>& models, const std::string& driver) {
  if (models.empty()) return record;
  json parsed = ParseRecord(record);
  parsed["gpus"] = models;
  if (!driver.empty()) parsed["driver"] = driver;
  return parsed.dump();
}

nlohmann::json ParseRecord(const std::string& record) {
  if (record.empty()) return json::object();
  json parsed = json::parse(record, nullptr, /*allow_exceptions=*/false);
  return parsed.is_object() ? parsed : json::object();
}

std::string PatchBytes(const std::string& record, const std::string& stored_patch) {
  const json parsed = ParseRecord(record);
  const json* patch = parsed.contains("git") ? &parsed["git"]["patch"] : nullptr;
  if (patch == nullptr || !patch->is_object() || !patch->value("stored", false)) return "";
  std::string bytes = patch->value("encoding", "text") == "base64" ? Base64Decode(stored_patch) : stored_patch;
  if (bytes.size() != patch->value("bytes", std::size_t{0}) || Sha256Hex(bytes) != patch->value("sha256", "")) {
    throw CorruptError(fmt::format("the stored patch ({} bytes) does not match its record ({} bytes, SHA-256 {})",
                                   bytes.size(), patch->value("bytes", std::size_t{0}), patch->value("sha256", "")));
  }
  return bytes;
}

std::vector<std::string> RuntimeDifferences(const nlohmann::json& study_record, const nlohmann::json& trial_runtime) {
  std::vector<std::string> differences;
  if (!trial_runtime.is_object() || !study_record.is_object()) return differences;
  const json libraries = study_record.value("libraries", json::object());
  for (const auto& [name, value] : trial_runtime.items()) {
    if (!value.is_string() || !libraries.is_object() || !libraries.contains(name)) continue;
    const json& recorded = libraries[name];
    if (recorded.is_string() && recorded.get<std::string>() != value.get<std::string>()) {
      differences.push_back(
          fmt::format("{} {} (the study's record: {})", name, value.get<std::string>(), recorded.get<std::string>()));
    }
  }
  if (trial_runtime.contains("dltune") && trial_runtime["dltune"].is_string() && study_record.contains("dltune")) {
    const json& dltune = study_record["dltune"];
    const std::string recorded = fmt::format("{} ({})", dltune.value("version", ""), dltune.value("build", ""));
    if (recorded != trial_runtime["dltune"].get<std::string>()) {
      differences.push_back(
          fmt::format("dltune {} (the study's record: {})", trial_runtime["dltune"].get<std::string>(), recorded));
    }
  }
  return differences;
}

}  // namespace dltune
