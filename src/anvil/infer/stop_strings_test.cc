// Stop strings: an occurrence is found when the bytes that complete it
// arrive, across token boundaries, and not again afterwards.
#include "anvil/infer/stop_strings.h"

#include <gtest/gtest.h>

#include <vector>

namespace anvil::infer {
namespace {

TEST(StopStringsTest, FoundWhenCompletedAcrossPieces) {
  const std::vector<std::string> stops = {"\n\n", "END"};
  std::string text;
  auto add = [&](const std::string& piece) {
    text += piece;
    return HitsStop(text, piece.size(), stops);
  };
  EXPECT_FALSE(add("12"));
  EXPECT_FALSE(add("3\n"));
  EXPECT_TRUE(add("\nx"));  // "\n\n" across two pieces
  text.clear();
  EXPECT_FALSE(add("E"));
  EXPECT_FALSE(add("N"));
  EXPECT_TRUE(add("D"));
  // An old occurrence does not count again.
  EXPECT_FALSE(HitsStop("END and more", 4, stops));
  EXPECT_FALSE(HitsStop("", 0, stops));
  EXPECT_FALSE(HitsStop("abc", 3, {}));
}

TEST(StopStringsTest, EmptyStopsAreRefused) {
  const std::vector<std::string> bad = {"x", ""};
  EXPECT_FALSE(ValidateStops(bad).ok());
  const std::vector<std::string> good = {"x"};
  EXPECT_TRUE(ValidateStops(good).ok());
}

}  // namespace
}  // namespace anvil::infer
