// SHA-256 (FIPS 180-4), for spec hashes and checkpoint checksums.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace dltune {

// Incremental SHA-256. Not thread-safe; cheap to copy.
class Sha256 {
 public:
  Sha256();
  // Adds bytes to the message.
  void Update(std::string_view bytes);
  // The digest of everything added, as 64 lowercase hex digits. The object must not be updated afterwards.
  std::string HexDigest();

 private:
  void Compress(const unsigned char* block);

  std::array<std::uint32_t, 8> state_;
  std::array<unsigned char, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t length_ = 0;  // bytes added
};

// SHA-256 of `bytes` as 64 lowercase hex digits.
std::string Sha256Hex(std::string_view bytes);

// "sha256:<64 hex digits>" of a file's bytes, as checkpoint records name a checkpoint's state file; throws IoError
// when the file cannot be read.
std::string Sha256File(const std::filesystem::path& file);

// A checkpoint checksum in the one form stores record, "sha256:<64 lowercase hex digits>": `text` in that form, or 64
// bare hex digits (as older stores hold for built-in checkpoints). nullopt for any other text.
std::optional<std::string> CanonicalChecksum(std::string_view text);

}  // namespace dltune
