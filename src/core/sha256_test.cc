#include "core/sha256.h"

#include <cctype>

#include <gtest/gtest.h>

namespace dltune {
namespace {

// FIPS 180-4 / NIST CAVP example digests.
TEST(Sha256, KnownDigests) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, IncrementalEqualsWhole) {
  std::string text;
  for (int i = 0; i < 300; ++i) text += static_cast<char>(i * 7);
  for (const std::size_t split : {0u, 1u, 55u, 56u, 63u, 64u, 65u, 128u, 299u}) {
    Sha256 hash;
    hash.Update(std::string_view(text).substr(0, split));
    hash.Update(std::string_view(text).substr(split));
    EXPECT_EQ(hash.HexDigest(), Sha256Hex(text)) << split;
  }
}

TEST(Sha256, ChecksumsHaveOneCanonicalForm) {
  const std::string hex = Sha256Hex("abc");
  EXPECT_EQ(CanonicalChecksum("sha256:" + hex), "sha256:" + hex);
  EXPECT_EQ(CanonicalChecksum(hex), "sha256:" + hex);  // the bare digits older stores hold
  std::string upper = hex;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  EXPECT_EQ(CanonicalChecksum("sha256:" + upper), "sha256:" + hex);
  EXPECT_EQ(CanonicalChecksum(""), std::nullopt);
  EXPECT_EQ(CanonicalChecksum("md5:900150983cd24fb0d6963f7d28e17f72"), std::nullopt);
  EXPECT_EQ(CanonicalChecksum("sha256:" + hex.substr(1)), std::nullopt);
  EXPECT_EQ(CanonicalChecksum("sha256:" + hex.substr(1) + "g"), std::nullopt);
}

}  // namespace
}  // namespace dltune
