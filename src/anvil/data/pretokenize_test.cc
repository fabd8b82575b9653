// Byte-level alphabet and GPT-2 pre-tokenization: splits written out by hand
// (ASCII cases follow the GPT-2 regex; non-ASCII cases pin our approximation),
// and the tiling property on random bytes.
#include "anvil/data/pretokenize.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "anvil/core/rng.h"
#include "anvil/data/byte_level.h"

namespace anvil::data {
namespace {

std::vector<std::string> Split(std::string_view text) {
  std::vector<std::string> out;
  PreTokenize(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

using V = std::vector<std::string>;

TEST(ByteLevel, MatchesGpt2AndIsABijection) {
  EXPECT_EQ(ToByteLevel(" "), "\u0120");   // Ġ
  EXPECT_EQ(ToByteLevel("\n"), "\u010A");  // Ċ
  EXPECT_EQ(ToByteLevel("a!~"), "a!~");
  EXPECT_EQ(ToByteLevel(std::string(1, '\0')), "\u0100");
  EXPECT_EQ(ToByteLevel("\xAD"), "\u0143");  // soft hyphen: the last remapped byte
  EXPECT_EQ(ToByteLevel("\xA1\xFF"), "\u00A1\u00FF");
  std::set<char32_t> seen;
  std::string all;
  for (int b = 0; b < 256; ++b) {
    seen.insert(ByteToCodePoint(static_cast<uint8_t>(b)));
    all.push_back(static_cast<char>(b));
  }
  EXPECT_EQ(seen.size(), 256u);
  std::string back;
  ASSERT_TRUE(FromByteLevel(ToByteLevel(all), &back));
  EXPECT_EQ(back, all);
  EXPECT_FALSE(FromByteLevel(" ", &back));             // ' ' itself is not in the alphabet
  EXPECT_FALSE(FromByteLevel("\xE2\x82\xAC", &back));  // '€'
  EXPECT_FALSE(FromByteLevel("\xC4", &back));          // truncated UTF-8
}

TEST(PreTokenize, AsciiFollowsTheGpt2Regex) {
  EXPECT_EQ(Split("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(Split("I'm here's don't"), (V{"I", "'m", " here", "'s", " don", "'t"}));
  EXPECT_EQ(Split("we'll they've you're I'd"),
            (V{"we", "'ll", " they", "'ve", " you", "'re", " I", "'d"}));
  EXPECT_EQ(Split("'S 'x ' 've"), (V{"'", "S", " '", "x", " '", " '", "ve"}));
  EXPECT_EQ(Split("it's  ok"), (V{"it", "'s", " ", " ok"}));
  EXPECT_EQ(Split("x   y"), (V{"x", "  ", " y"}));
  EXPECT_EQ(Split("a\n\nb"), (V{"a", "\n", "\n", "b"}));
  EXPECT_EQ(Split("a\n\n"), (V{"a", "\n\n"}));
  EXPECT_EQ(Split("x  \n"), (V{"x", "  \n"}));
  EXPECT_EQ(Split("\t\tx"), (V{"\t", "\t", "x"}));
  EXPECT_EQ(Split(" \tx"), (V{" ", "\t", "x"}));
  EXPECT_EQ(Split("123abc 42!!"), (V{"123", "abc", " 42", "!!"}));
  EXPECT_EQ(Split("a.b, c...d"), (V{"a", ".", "b", ",", " c", "...", "d"}));
  EXPECT_EQ(Split("(\"quote\")"), (V{"(\"", "quote", "\")"}));
  EXPECT_EQ(Split(std::string("a\0b\x7f", 4)), (V{"a", std::string(1, '\0'), "b", "\x7f"}));
  EXPECT_EQ(Split(" "), (V{" "}));
  EXPECT_EQ(Split("  "), (V{"  "}));
  EXPECT_EQ(Split("x "), (V{"x", " "}));
  EXPECT_EQ(Split(""), V{});
}

TEST(PreTokenize, NonAsciiApproximation) {
  EXPECT_EQ(Split("caf\xC3\xA9 na\xC3\xAFve"), (V{"caf\xC3\xA9", " na\xC3\xAFve"}));  // letters
  EXPECT_EQ(Split("\xD0\x9F\xD1\x80\xD0\xB8 \xE4\xBD\xA0\xE5\xA5\xBD"),  // Cyrillic, CJK
            (V{"\xD0\x9F\xD1\x80\xD0\xB8", " \xE4\xBD\xA0\xE5\xA5\xBD"}));
  EXPECT_EQ(Split("a\xE2\x80\x94"
                  "b"),
            (V{"a", "\xE2\x80\x94", "b"}));       // em dash: other
  EXPECT_EQ(Split("\xE2\x80\x9Chi\xE2\x80\x9D"),  // curly quotes: other
            (V{"\xE2\x80\x9C", "hi", "\xE2\x80\x9D"}));
  EXPECT_EQ(Split("x\xC2\xA0y"), (V{"x", "\xC2\xA0", "y"}));  // NBSP: white space
  EXPECT_EQ(Split("\xC2\xBD cup \xC2\xB2"), (V{"\xC2\xBD", " cup", " \xC2\xB2"}));  // ½ ²: numbers
  EXPECT_EQ(Split("e\xCC\x81t\xC3\xA9"), (V{"e", "\xCC\x81", "t\xC3\xA9"}));  // combining mark
  EXPECT_EQ(Split("5\xE2\x82\xAC"), (V{"5", "\xE2\x82\xAC"}));                // €: other
  EXPECT_EQ(Split("\xF0\x9F\x98\x80!"), (V{"\xF0\x9F\x98\x80!"}));  // emoji: other, joins '!'
  // Invalid UTF-8 bytes are one-byte letters.
  EXPECT_EQ(Split("\xFF\xFE"
                  "ab \x80"),
            (V{"\xFF\xFE"
               "ab",
               " \x80"}));
  EXPECT_EQ(Split("\xE2\x82"
                  "a"),
            (V{"\xE2\x82"
               "a"}));                                          // truncated sequence
  EXPECT_EQ(Split("\xC0\xAF!"), (V{"\xC0\xAF", "!"}));          // overlong '/'
  EXPECT_EQ(Split("\xED\xA0\x80."), (V{"\xED\xA0\x80", "."}));  // surrogate
}

TEST(PreTokenize, ClassifiesCharacters) {
  EXPECT_EQ(ClassifyChar("a", 0).cls, CharClass::kLetter);
  EXPECT_EQ(ClassifyChar("7", 0).cls, CharClass::kNumber);
  EXPECT_EQ(ClassifyChar("\v", 0).cls, CharClass::kSpace);
  EXPECT_EQ(ClassifyChar("\x1c", 0).cls, CharClass::kOther);  // not \s in Unicode regexes
  const CharInfo ideographic_space = ClassifyChar("\xE3\x80\x80", 0);
  EXPECT_EQ(ideographic_space.cls, CharClass::kSpace);
  EXPECT_EQ(ideographic_space.length, 3);
  EXPECT_EQ(ClassifyChar("\xC2\xAA", 0).cls, CharClass::kLetter);      // ª
  EXPECT_EQ(ClassifyChar("\xC2\xB5", 0).cls, CharClass::kLetter);      // µ
  EXPECT_EQ(ClassifyChar("\xC3\x97", 0).cls, CharClass::kOther);       // ×
  EXPECT_EQ(ClassifyChar("\xEF\xBC\x95", 0).cls, CharClass::kNumber);  // fullwidth 5
  EXPECT_EQ(ClassifyChar("\xF0\x90\x80\x80", 0).length, 4);
}

TEST(PreTokenize, PiecesTileRandomBytes) {
  const RngStream rng(7, RngPurpose::kTest);
  uint64_t k = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = rng.U32(k++) % 200;
    std::string text;
    for (size_t i = 0; i < n; ++i) {
      const uint32_t r = rng.U32(k++);
      // Mostly ASCII letters, spaces and punctuation, some arbitrary bytes.
      const char* common = "aab c  d\n\t'sre,.!0123";
      text.push_back(r % 4 == 0 ? static_cast<char>(r >> 8) : common[(r >> 8) % 21]);
    }
    std::string joined;
    PreTokenize(text, [&](std::string_view p) {
      EXPECT_FALSE(p.empty());
      joined += p;
    });
    EXPECT_EQ(joined, text);
  }
}

}  // namespace
}  // namespace anvil::data
