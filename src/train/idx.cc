#include "idx.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <system_error>

#include <fmt/format.h>

#include "dltune/core/error.h"

namespace dltune {
namespace {

constexpr std::uint8_t kUnsignedByteType = 0x08;
// Deflate expands at most ~1032:1, so a gzip file of S bytes holds at most this many times S bytes of data; a
// header announcing more is corrupt (checked before anything is allocated).
constexpr std::uint64_t kMaxDeflateRatio = 1032;
// zlib's buffer size; reads of at least twice this size inflate straight into the caller's memory.
constexpr unsigned kGzBufferBytes = 128 * 1024;
// gzread() takes an unsigned and returns an int: read at most this much per call.
constexpr std::int64_t kMaxReadChunk = std::int64_t{1} << 30;

std::uint32_t BigEndian32(const unsigned char* bytes) {
  return (std::uint32_t{bytes[0]} << 24) | (std::uint32_t{bytes[1]} << 16) | (std::uint32_t{bytes[2]} << 8) |
         std::uint32_t{bytes[3]};
}

}  // namespace

// Owns a gzFile.
class IdxReader::File {
 public:
  explicit File(const std::string& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (file_ == nullptr) {
      const int error = errno;
      throw IoError(fmt::format("{}: cannot open: {}", path, error != 0 ? std::strerror(error) : "out of memory"));
    }
    gzbuffer(file_, kGzBufferBytes);
  }
  ~File() { gzclose(file_); }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // Reads up to `size` bytes; returns how many were read (fewer only at the end of the data). Throws on a corrupt
  // stream; a stream cut short (truncated .gz) reads as the bytes before the cut.
  std::int64_t Read(void* out, std::int64_t size) {
    auto* bytes = static_cast<unsigned char*>(out);
    std::int64_t done = 0;
    while (done < size) {
      const int got = gzread(file_, bytes + done, static_cast<unsigned>(std::min(size - done, kMaxReadChunk)));
      if (got < 0) {
        int code = 0;
        const char* message = gzerror(file_, &code);
        throw CorruptError(
            fmt::format("{}: corrupt gzip data: {}", path_, message != nullptr ? message : "read error"));
      }
      if (got == 0) break;
      done += got;
    }
    return done;
  }

  // True when the gzip stream ended before its end marker and checksum (the file is cut short).
  bool cut_short() const {
    int code = Z_OK;
    gzerror(file_, &code);
    return code == Z_BUF_ERROR;
  }

 private:
  std::string path_;
  gzFile file_;
};

IdxReader::IdxReader(const std::string& path, int dims) : path_(path) {
  TORCH_CHECK(dims >= 1 && dims <= 255, "IdxReader: dims must be in [1, 255]");
  std::error_code size_error;
  const std::uint64_t file_bytes = std::filesystem::file_size(path, size_error);
  if (size_error) throw IoError(fmt::format("{}: cannot open: {}", path, size_error.message()));
  file_ = std::make_unique<File>(path);

  const std::uint32_t expected_magic = (std::uint32_t{kUnsignedByteType} << 8) | static_cast<std::uint32_t>(dims);
  std::array<unsigned char, 4> magic_bytes{};
  if (file_->Read(magic_bytes.data(), 4) != 4) throw Error(fmt::format("{}: truncated: no IDX header", path));
  const std::uint32_t magic = BigEndian32(magic_bytes.data());
  if (magic != expected_magic) {
    const bool is_idx = magic_bytes[0] == 0 && magic_bytes[1] == 0;
    const std::string what = !is_idx                               ? "not an IDX file"
                             : magic_bytes[2] != kUnsignedByteType ? "values are not unsigned bytes (type 0x08)"
                                                                   : "wrong number of dimensions";
    throw Error(fmt::format("{}: bad magic number 0x{:08x}: {} (expected 0x{:08x}: unsigned bytes, {} dimensions)",
                            path, magic, what, expected_magic, dims));
  }

  std::vector<unsigned char> size_bytes(4 * static_cast<std::size_t>(dims));
  const auto sizes_length = static_cast<std::int64_t>(size_bytes.size());
  if (file_->Read(size_bytes.data(), sizes_length) != sizes_length) {
    throw Error(fmt::format("{}: truncated: the header ends before its {} dimension sizes", path, dims));
  }
  std::uint64_t values = 1;
  for (int d = 0; d < dims; ++d) {
    const std::uint32_t size = BigEndian32(size_bytes.data() + 4 * static_cast<std::size_t>(d));
    shape_.push_back(static_cast<std::int64_t>(size));
    shape_text_ += (d == 0 ? "" : " x ") + std::to_string(size);
    // Sizes are < 2^32 each; saturate instead of overflowing.
    values = size == 0 || values <= std::numeric_limits<std::uint64_t>::max() / size
                 ? values * size
                 : std::numeric_limits<std::uint64_t>::max();
  }
  if (values > file_bytes * kMaxDeflateRatio) {
    throw CorruptError(fmt::format("{}: corrupt header: sizes {} need {} bytes, more than a {}-byte file can hold",
                                   path, shape_text_, values, file_bytes));
  }
  values_ = static_cast<std::int64_t>(values);
}

IdxReader::~IdxReader() = default;

void IdxReader::Read(std::uint8_t* out, std::int64_t count) {
  TORCH_CHECK(count >= 0 && read_ + count <= values_, "IdxReader::Read past the announced values");
  const std::int64_t got = file_->Read(out, count);
  read_ += got;
  if (got < count) {
    throw Error(fmt::format("{}: truncated: the header announces {} = {} bytes of data, the file has {}", path_,
                            shape_text_, values_, read_));
  }
}

void IdxReader::Finish() {
  TORCH_CHECK(read_ == values_, "IdxReader::Finish before every value was read");
  // Reading past the end also makes zlib verify the gzip checksum (a mismatch throws in Read).
  unsigned char extra = 0;
  const std::int64_t extra_bytes = file_->Read(&extra, 1);
  if (file_->cut_short())
    throw CorruptError(fmt::format("{}: truncated: the gzip stream ends before its checksum", path_));
  if (extra_bytes != 0) {
    throw Error(
        fmt::format("{}: trailing data after the {} = {} bytes the header announces", path_, shape_text_, values_));
  }
}

torch::Tensor ReadIdxUint8(const std::string& path, int dims) {
  IdxReader reader(path, dims);
  torch::Tensor values = torch::empty(reader.shape(), torch::kUInt8);
  reader.Read(values.data_ptr<std::uint8_t>(), reader.values());
  reader.Finish();
  return values;
}

torch::Tensor ReadIdxImages(const std::string& path) { return ReadIdxUint8(path, 3); }

torch::Tensor ReadIdxLabels(const std::string& path) { return ReadIdxUint8(path, 1); }

}  // namespace dltune
