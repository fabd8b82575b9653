// Config: typed reads, defaults, --set overrides, unknown keys and errors that
// name the file and the key; the resolved TOML reads back to the same values.
#include "anvil/core/config.h"

#include <gtest/gtest.h>

namespace anvil {
namespace {

constexpr const char* kToml = R"(
seed = 7
[model]
dim = 256
n_layers = 4
norm_eps = 1e-5
tied = false
name = "tiny"
[optim]
lr = 3
)";

TEST(Config, TypedReadsDefaultsAndOverrides) {
  Result<Config> c = Config::FromString(kToml, "tiny.toml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->Set("model.n_layers=2").ok());
  ASSERT_TRUE(c->Set("train.precision=bf16").ok());
  EXPECT_EQ(*c->GetInt("seed", 0), 7);
  EXPECT_EQ(*c->GetInt("model.dim", 0), 256);
  EXPECT_EQ(*c->GetInt("model.n_layers", 0), 2);
  EXPECT_DOUBLE_EQ(*c->GetDouble("model.norm_eps", 0), 1e-5);
  EXPECT_DOUBLE_EQ(*c->GetDouble("optim.lr", 0), 3.0);  // int accepted as a number
  EXPECT_FALSE(*c->GetBool("model.tied", true));
  EXPECT_EQ(*c->GetString("model.name", ""), "tiny");
  EXPECT_EQ(*c->GetString("train.precision", "f32"), "bf16");
  EXPECT_EQ(*c->GetInt("train.steps", 100), 100);  // default
  EXPECT_TRUE(c->CheckAllUsed().ok());

  Result<Config> back = Config::FromString(c->ResolvedToml(), "resolved");
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << c->ResolvedToml();
  EXPECT_EQ(*back->GetInt("model.n_layers", 0), 2);
  EXPECT_EQ(*back->GetInt("train.steps", 0), 100);
  EXPECT_DOUBLE_EQ(*back->GetDouble("model.norm_eps", 0), 1e-5);
  EXPECT_EQ(*back->GetString("train.precision", ""), "bf16");
}

// Floats print as the shortest text that reads back to the same double.
TEST(Config, ResolvedFloatsAreShortestRoundTrip) {
  Result<Config> c = Config::FromString("a = 0.9\nb = 1e-5\nc = 0.30000000000000004\n", "f");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (const char* key : {"a", "b", "c"}) ASSERT_TRUE(c->GetDouble(key, 0).ok());
  const std::string text = c->ResolvedToml();
  EXPECT_NE(text.find("a = 0.9\n"), std::string::npos) << text;
  EXPECT_NE(text.find("b = 1e-05\n"), std::string::npos) << text;
  Result<Config> back = Config::FromString(text, "resolved");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back->GetDouble("a", 0), 0.9);
  EXPECT_EQ(*back->GetDouble("b", 0), 1e-5);
  EXPECT_EQ(*back->GetDouble("c", 0), 0.1 + 0.2);
}

// A resume's comparison: only keys read now, selected and saved; numbers as
// numbers (lr = 3 saved, 3.0 read); each change named with both values.
TEST(Config, ChangedFromNamesTheSelectedKeysThatDiffer) {
  auto saved = Config::FromString(kToml, "saved.toml");
  ASSERT_TRUE(saved.ok());
  auto now = Config::FromString(kToml, "now.toml");
  ASSERT_TRUE(now.ok());
  ASSERT_TRUE(now->Set("model.dim=128").ok());
  ASSERT_TRUE(now->Set("model.name=small").ok());
  ASSERT_TRUE(now->GetInt("model.dim", 0).ok());
  ASSERT_TRUE(now->GetString("model.name", "").ok());
  ASSERT_TRUE(now->GetDouble("optim.lr", 0).ok());
  ASSERT_TRUE(now->GetInt("model.new_key", 5).ok());  // not in the saved run
  const auto model = [](const std::string& key) { return key.starts_with("model."); };
  EXPECT_EQ(now->ChangedFrom(*saved, model),
            (std::vector<std::string>{"model.dim = 256 (now: 128)",
                                      "model.name = 'tiny' (now: 'small')"}));
  EXPECT_TRUE(
      now->ChangedFrom(*saved, [](const std::string& k) { return k == "optim.lr"; }).empty());
}

TEST(Config, ErrorsNameSourceAndKey) {
  Result<Config> c = Config::FromString(kToml, "tiny.toml");
  ASSERT_TRUE(c.ok());
  const Status wrong = c->GetInt("model.name", 0).status();
  EXPECT_EQ(wrong.message(), "tiny.toml: key 'model.name' must be an integer, got 'tiny'");
  ASSERT_TRUE(c->Set("model.dimm=3").ok());
  (void)c->GetInt("seed", 0);
  const Status unknown = c->CheckAllUsed();
  EXPECT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find("--set: unknown key 'model.dimm'"), std::string::npos);
  EXPECT_NE(unknown.message().find("tiny.toml: unknown key 'optim.lr'"), std::string::npos);

  const Status syntax = Config::FromString("[model\ndim = 1", "bad.toml").status();
  EXPECT_EQ(syntax.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(syntax.message().rfind("bad.toml:1:", 0), 0u) << syntax.message();
  EXPECT_FALSE(c->Set("novalue").ok());
  EXPECT_EQ(Config::FromFile("/nonexistent/x.toml").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace anvil
