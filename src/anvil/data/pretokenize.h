// GPT-2 pre-tokenization without a regex library. The pieces tile the input
// exactly (no byte dropped or added), so BPE on the pieces round-trips any
// bytes. Equal to the GPT-2 regex for ASCII; an approximation beyond (below).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace anvil::data {

// The regex classes the GPT-2 pattern distinguishes.
enum class CharClass : uint8_t { kLetter, kNumber, kSpace, kOther };

struct CharInfo {
  CharClass cls;
  uint8_t length;  // bytes of the character: 1..4
};

// The class and length of the character starting at text[pos] (pos < size).
// ASCII is exact: letters A-Z a-z, numbers 0-9, spaces \t \n \v \f \r and ' ',
// the rest (punctuation, controls, DEL) other. Beyond ASCII we approximate
// \p{L}, \p{N} and \s: a valid UTF-8 sequence is a letter unless a small
// table says otherwise (Unicode white space such as U+00A0 and U+3000; digits
// and fractions such as '²' '½', Roman numerals, circled numbers and the
// Arabic, Devanagari and fullwidth digits; punctuation and symbols such as C1
// controls, Latin-1 signs, '×', combining marks U+0300-036F, general
// punctuation U+2010-205E (dashes, curly quotes), currency, arrows, math, box
// drawing, dingbats, CJK and fullwidth punctuation, private use, emoji). An
// invalid byte (a stray continuation byte, a truncated or overlong sequence, a
// surrogate) is a one-byte letter. Known differences from Hugging Face's
// regex: unassigned code points and most combining marks outside U+0300-036F
// (e.g. Indic vowel signs, Hebrew and Arabic points) are letters here, so
// such words stay whole where GPT-2 splits them.
CharInfo ClassifyChar(std::string_view text, size_t pos);

// The end of the pre-token that starts at `pos` (< text.size()): the first
// alternative of
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// that matches at pos, as a backtracking regex engine would pick it.
size_t PreTokenEnd(std::string_view text, size_t pos);

// Calls fn(piece) for each pre-token of `text` in order.
template <typename Fn>
void PreTokenize(std::string_view text, Fn&& fn) {
  for (size_t pos = 0; pos < text.size();) {
    const size_t end = PreTokenEnd(text, pos);
    fn(text.substr(pos, end - pos));
    pos = end;
  }
}

}  // namespace anvil::data
