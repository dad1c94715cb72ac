// Reading IDX files (the MNIST / Fashion-MNIST format), gzip-compressed or plain.
//
// An IDX file is a big-endian header (magic 0x00 0x00 <type> <ndims>, then ndims uint32 sizes) followed by the
// values in row-major order. Only unsigned bytes (type 0x08) are supported. Files are read through zlib, which
// also reads uncompressed files as they are. Errors are dltune::Error naming the file and what is wrong with it:
// missing, bad magic, wrong number of dimensions, truncated, trailing data, corrupt gzip stream.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace dltune {

// The values of an IDX file of unsigned bytes with exactly `dims` dimensions, as a uint8 tensor of its shape.
// Thread-safe.
torch::Tensor ReadIdxUint8(const std::string& path, int dims);

// Images: an IDX file of unsigned bytes with 3 dimensions, returned as uint8 [N, rows, cols]. Thread-safe.
torch::Tensor ReadIdxImages(const std::string& path);

// Labels: an IDX file of unsigned bytes with 1 dimension, returned as uint8 [N]. Thread-safe.
torch::Tensor ReadIdxLabels(const std::string& path);

// Streams the values of an IDX file of unsigned bytes in chunks, for decoding without a uint8 copy of the whole
// file. Not thread-safe (one reader per thread); different readers are independent.
class IdxReader {
 public:
  // Opens `path` and reads and checks its header (magic for unsigned bytes and `dims` dimensions, sizes that the
  // file can hold). Throws Error.
  IdxReader(const std::string& path, int dims);
  ~IdxReader();
  IdxReader(const IdxReader&) = delete;
  IdxReader& operator=(const IdxReader&) = delete;

  // The sizes the header announces.
  const std::vector<std::int64_t>& shape() const { return shape_; }
  // Number of values: the product of shape().
  std::int64_t values() const { return values_; }
  // Reads the next `count` values into `out`; throws Error (truncated) when the file has fewer left.
  void Read(std::uint8_t* out, std::int64_t count);
  // Checks that every value was read and the file ends there (no trailing data, a complete gzip stream with a
  // matching checksum). Throws Error.
  void Finish();

 private:
  class File;

  std::string path_;
  std::unique_ptr<File> file_;
  std::vector<std::int64_t> shape_;
  std::string shape_text_;  // "60000 x 28 x 28"
  std::int64_t values_ = 0;
  std::int64_t read_ = 0;
};

}  // namespace dltune
