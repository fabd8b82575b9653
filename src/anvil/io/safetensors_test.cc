// safetensors: round trip, a hand-built file in the published format, and
// clear errors for truncated or mismatched files.
#include "anvil/io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "anvil/core/file_util.h"

namespace anvil::io {
namespace {

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("anvil_safetensors_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

TEST_F(SafetensorsTest, RoundTrip) {
  const float w[6] = {1, 2, 3, 4, 5, 6};
  const uint16_t b[3] = {0x3f80, 0x4000, 0xc040};  // bf16 1, 2, -3
  const std::string path = Path("model.safetensors");
  ASSERT_TRUE(WriteSafetensors(path,
                               {{"model.embed_tokens.weight", DType::kF32, {2, 3}, w},
                                {"lm_head.weight", DType::kBF16, {3}, b}},
                               {{"format", "pt"}})
                  .ok());
  Result<SafetensorsFile> f = SafetensorsFile::Read(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->metadata().at("format"), "pt");
  Result<const void*> pw = f->Get("model.embed_tokens.weight", DType::kF32, {2, 3});
  ASSERT_TRUE(pw.ok());
  EXPECT_EQ(std::memcmp(*pw, w, sizeof(w)), 0);
  Result<const void*> pb = f->Get("lm_head.weight", DType::kBF16, {3});
  ASSERT_TRUE(pb.ok());
  EXPECT_EQ(std::memcmp(*pb, b, sizeof(b)), 0);
}

TEST_F(SafetensorsTest, ReadsTheSpecLayout) {
  // Built by hand from the format description: u64 header length, JSON, data.
  const std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(header.size() >> (8 * i));
  bytes += header;
  const float x[2] = {1.5f, -2.0f};
  bytes.append(reinterpret_cast<const char*>(x), sizeof(x));
  const std::string path = Path("hand.safetensors");
  std::ofstream(path, std::ios::binary) << bytes;
  Result<SafetensorsFile> f = SafetensorsFile::Read(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  Result<const void*> p = f->Get("x", DType::kF32, {2});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(static_cast<const float*>(*p)[1], -2.0f);
}

TEST_F(SafetensorsTest, WrittenHeaderIsAlignedAndNamesDtypes) {
  const float w[1] = {1};
  const std::string path = Path("a.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"w", DType::kF32, {1}, w}}).ok());
  Result<std::string> bytes = ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<unsigned char>((*bytes)[i])} << (8 * i);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_NE(bytes->find(R"("dtype":"F32")"), std::string::npos);
  EXPECT_EQ(bytes->size(), 8 + n + 4);
}

TEST_F(SafetensorsTest, ErrorsNameTheFileAndTheProblem) {
  const float w[4] = {1, 2, 3, 4};
  const std::string path = Path("t.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"w", DType::kF32, {4}, w}}).ok());
  Result<SafetensorsFile> f = SafetensorsFile::Read(path);
  ASSERT_TRUE(f.ok());
  const Status wrong_shape = f->Get("w", DType::kF32, {2, 2}).status();
  EXPECT_NE(wrong_shape.message().find("tensor 'w' is f32[4], expected f32[2, 2]"),
            std::string::npos)
      << wrong_shape.ToString();
  EXPECT_EQ(f->Get("missing", DType::kF32, {4}).status().code(), StatusCode::kNotFound);

  // Truncate the data section.
  Result<std::string> bytes = ReadFile(path);
  const std::string cut = Path("cut.safetensors");
  std::ofstream(cut, std::ios::binary) << bytes->substr(0, bytes->size() - 3);
  const Status truncated = SafetensorsFile::Read(cut).status();
  EXPECT_EQ(truncated.code(), StatusCode::kDataLoss);
  EXPECT_NE(truncated.message().find("cut.safetensors"), std::string::npos);

  EXPECT_EQ(SafetensorsFile::Read(Path("nope")).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(WriteSafetensors(Path("dup"), {{"a", DType::kF32, {1}, w}, {"a", DType::kF32, {1}, w}}).ok());
}

}  // namespace
}  // namespace anvil::io
