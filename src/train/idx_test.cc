#include "idx.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/files.h"
#include "dltune/core/error.h"

namespace dltune {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;
using ::testing::AllOf;
using ::testing::HasSubstr;

// An IDX header: magic 0x00 0x00 <type> <ndims>, then the sizes big-endian.
Bytes Header(unsigned char type, const std::vector<std::uint32_t>& sizes) {
  Bytes bytes = {0, 0, type, static_cast<unsigned char>(sizes.size())};
  for (std::uint32_t size : sizes) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<unsigned char>(size >> shift));
  }
  return bytes;
}

Bytes Concat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Bytes 0, 1, 2, ... (mod 256).
Bytes Ramp(std::size_t count) {
  Bytes bytes(count);
  for (std::size_t i = 0; i < count; ++i) bytes[i] = static_cast<unsigned char>(i % 256);
  return bytes;
}

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("dltune_idx_test_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { RemoveTree(dir_); }

  // Writes `bytes` gzip-compressed with zlib's gzwrite; returns the path.
  std::string WriteGz(const std::string& name, const Bytes& bytes) {
    const std::string path = (dir_ / name).string();
    gzFile file = gzopen(path.c_str(), "wb");
    EXPECT_NE(file, nullptr);
    if (!bytes.empty()) {
      EXPECT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
    }
    EXPECT_EQ(gzclose(file), Z_OK);
    return path;
  }
  std::string WritePlain(const std::string& name, const Bytes& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path;
  }
  Bytes ReadRaw(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), {});
  }

  fs::path dir_;
};

// The message of the dltune::Error `read` throws (fails the test when it throws nothing or something else).
template <typename Function>
std::string ErrorOf(Function read) {
  try {
    read();
  } catch (const Error& error) {
    return error.what();
  }
  ADD_FAILURE() << "no dltune::Error thrown";
  return "";
}

TEST_F(IdxTest, ReadsGzipImagesWithShapeAndValues) {
  const std::string path = WriteGz("images.gz", Concat(Header(0x08, {3, 4, 5}), Ramp(60)));
  const torch::Tensor images = ReadIdxImages(path);
  EXPECT_EQ(images.dtype(), torch::kUInt8);
  EXPECT_EQ(images.sizes(), (std::vector<std::int64_t>{3, 4, 5}));
  EXPECT_EQ(images[0][0][0].item<int>(), 0);
  EXPECT_EQ(images[1][2][3].item<int>(), 20 + 10 + 3);
  EXPECT_EQ(images[2][3][4].item<int>(), 59);
}

TEST_F(IdxTest, ReadsGzipLabels) {
  const std::string path = WriteGz("labels.gz", Concat(Header(0x08, {4}), {9, 0, 3, 7}));
  const torch::Tensor labels = ReadIdxLabels(path);
  EXPECT_EQ(labels.sizes(), (std::vector<std::int64_t>{4}));
  EXPECT_TRUE(labels.equal(torch::tensor({9, 0, 3, 7}, torch::kUInt8)));
}

TEST_F(IdxTest, ReadsUncompressedFilesToo) {
  const std::string path = WritePlain("labels", Concat(Header(0x08, {3}), {1, 2, 3}));
  EXPECT_TRUE(ReadIdxLabels(path).equal(torch::tensor({1, 2, 3}, torch::kUInt8)));
}

TEST_F(IdxTest, ReadsLargeFileAcrossBufferBoundaries) {
  const Bytes data = Ramp(300 * 28 * 28);
  const std::string path = WriteGz("big.gz", Concat(Header(0x08, {300, 28, 28}), data));
  const torch::Tensor images = ReadIdxImages(path);
  const torch::Tensor expected =
      torch::from_blob(const_cast<unsigned char*>(data.data()), {300, 28, 28}, torch::kUInt8);
  EXPECT_TRUE(images.equal(expected));
}

TEST_F(IdxTest, EmptyDatasetIsValid) {
  const std::string path = WriteGz("empty.gz", Header(0x08, {0, 28, 28}));
  EXPECT_EQ(ReadIdxImages(path).sizes(), (std::vector<std::int64_t>{0, 28, 28}));
}

TEST_F(IdxTest, MissingFileNamesThePath) {
  const std::string path = (dir_ / "nope.gz").string();
  EXPECT_THAT(ErrorOf([&] { ReadIdxLabels(path); }), AllOf(HasSubstr(path), HasSubstr("cannot open")));
}

TEST_F(IdxTest, LabelsFileReadAsImagesIsBadMagic) {
  const std::string path = WriteGz("labels.gz", Concat(Header(0x08, {2}), {1, 2}));
  EXPECT_THAT(ErrorOf([&] { ReadIdxImages(path); }),
              AllOf(HasSubstr(path), HasSubstr("bad magic number 0x00000801"), HasSubstr("wrong number of dimensions"),
                    HasSubstr("expected 0x00000803")));
}

TEST_F(IdxTest, NonByteTypeIsBadMagic) {
  const std::string path = WriteGz("floats.gz", Concat(Header(0x0D, {1}), {0, 0, 0, 0}));
  EXPECT_THAT(ErrorOf([&] { ReadIdxLabels(path); }),
              AllOf(HasSubstr(path), HasSubstr("bad magic number 0x00000d01"), HasSubstr("not unsigned bytes")));
}

TEST_F(IdxTest, OtherFileIsNotIdx) {
  const std::string path = WriteGz("text.gz", Ramp(4 + 1) /* starts 0x00 0x01 */);
  EXPECT_THAT(ErrorOf([&] { ReadIdxLabels(path); }), AllOf(HasSubstr(path), HasSubstr("not an IDX file")));
}

TEST_F(IdxTest, EmptyFileIsTruncated) {
  const std::string path = WriteGz("empty.gz", {});
  EXPECT_THAT(ErrorOf([&] { ReadIdxLabels(path); }), AllOf(HasSubstr(path), HasSubstr("truncated: no IDX header")));
}

TEST_F(IdxTest, HeaderWithoutSizesIsTruncated) {
  const std::string path = WriteGz("short.gz", {0, 0, 8, 3, 0, 0});
  EXPECT_THAT(ErrorOf([&] { ReadIdxImages(path); }), AllOf(HasSubstr(path), HasSubstr("truncated: the header ends")));
}

TEST_F(IdxTest, MissingDataIsTruncated) {
  const std::string path = WriteGz("images.gz", Concat(Header(0x08, {2, 3, 3}), Ramp(17)));
  EXPECT_THAT(ErrorOf([&] { ReadIdxImages(path); }),
              AllOf(HasSubstr(path), HasSubstr("truncated"), HasSubstr("2 x 3 x 3 = 18 bytes"), HasSubstr("has 17")));
}

TEST_F(IdxTest, TrailingDataIsRejected) {
  const std::string gz = WriteGz("labels.gz", Concat(Header(0x08, {2}), {1, 2, 3}));
  EXPECT_THAT(ErrorOf([&] { ReadIdxLabels(gz); }), AllOf(HasSubstr(gz), HasSubstr("trailing data")));
  const std::string plain = WritePlain("labels", Concat(Header(0x08, {2}), {1, 2, 3}));
  EXPECT_THAT(ErrorOf([&] { ReadIdxLabels(plain); }), AllOf(HasSubstr(plain), HasSubstr("trailing data")));
}

TEST_F(IdxTest, CutGzipStreamIsTruncated) {
  const Bytes whole = ReadRaw(WriteGz("whole.gz", Concat(Header(0x08, {100, 28, 28}), Ramp(100 * 28 * 28))));
  // Without its last 8 bytes (CRC-32 and length) all data may decode, but the stream is incomplete.
  const std::string no_trailer = WritePlain("no_trailer.gz", Bytes(whole.begin(), whole.end() - 8));
  EXPECT_THAT(ErrorOf([&] { ReadIdxImages(no_trailer); }),
              AllOf(HasSubstr(no_trailer), HasSubstr("truncated: the gzip stream ends before its checksum")));
  const std::string half = WritePlain("half.gz", Bytes(whole.begin(), whole.begin() + whole.size() / 2));
  EXPECT_THAT(ErrorOf([&] { ReadIdxImages(half); }), AllOf(HasSubstr(half), HasSubstr("truncated")));
}

TEST_F(IdxTest, CorruptGzipChecksumIsReported) {
  Bytes bytes = ReadRaw(WriteGz("whole.gz", Concat(Header(0x08, {64}), Ramp(64))));
  bytes[bytes.size() - 8] ^= 0xFF;  // First byte of the CRC-32.
  const std::string path = WritePlain("bad_crc.gz", bytes);
  EXPECT_THAT(ErrorOf([&] { ReadIdxLabels(path); }), AllOf(HasSubstr(path), HasSubstr("corrupt gzip data")));
}

TEST_F(IdxTest, AbsurdSizesAreRejectedBeforeAllocating) {
  const std::string path = WriteGz("huge.gz", Concat(Header(0x08, {60000, 65535, 65535}), Ramp(10)));
  EXPECT_THAT(ErrorOf([&] { ReadIdxImages(path); }),
              AllOf(HasSubstr(path), HasSubstr("corrupt header"), HasSubstr("60000 x 65535 x 65535")));
}

}  // namespace
}  // namespace dltune
