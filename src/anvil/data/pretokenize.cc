// The GPT-2 pattern as a hand-written matcher over classified characters.
#include "anvil/data/pretokenize.h"

#include <algorithm>
#include <array>

namespace anvil::data {
namespace {

constexpr CharClass L = CharClass::kLetter;
constexpr CharClass N = CharClass::kNumber;
constexpr CharClass S = CharClass::kSpace;
constexpr CharClass O = CharClass::kOther;

// ASCII exactly as the regex sees it.
constexpr std::array<CharClass, 128> kAscii = [] {
  std::array<CharClass, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) {
      t[c] = L;
    } else if (c >= '0' && c <= '9') {
      t[c] = N;
    } else if ((c >= 0x09 && c <= 0x0D) || c == ' ') {
      t[c] = S;
    } else {
      t[c] = O;
    }
  }
  return t;
}();

// Non-ASCII code points that are not letters, sorted and disjoint; the rest
// of valid UTF-8 counts as letters (see the header for the approximation).
struct Range {
  char32_t lo, hi;
  CharClass cls;
};
constexpr Range kRanges[] = {
    {0x0080, 0x0084, O}, {0x0085, 0x0085, S}, {0x0086, 0x009F, O},   {0x00A0, 0x00A0, S},
    {0x00A1, 0x00A9, O}, {0x00AB, 0x00B1, O}, {0x00B2, 0x00B3, N},   {0x00B4, 0x00B4, O},
    {0x00B6, 0x00B8, O}, {0x00B9, 0x00B9, N}, {0x00BB, 0x00BB, O},   {0x00BC, 0x00BE, N},
    {0x00BF, 0x00BF, O}, {0x00D7, 0x00D7, O}, {0x00F7, 0x00F7, O},   {0x0300, 0x036F, O},
    {0x0660, 0x0669, N}, {0x06F0, 0x06F9, N}, {0x0966, 0x096F, N},   {0x1680, 0x1680, S},
    {0x2000, 0x200A, S}, {0x200B, 0x200F, O}, {0x2010, 0x2027, O},   {0x2028, 0x2029, S},
    {0x202A, 0x202E, O}, {0x202F, 0x202F, S}, {0x2030, 0x205E, O},   {0x205F, 0x205F, S},
    {0x2070, 0x2070, N}, {0x2074, 0x2079, N}, {0x2080, 0x2089, N},   {0x20A0, 0x20CF, O},
    {0x2150, 0x2182, N}, {0x2190, 0x245F, O}, {0x2460, 0x249B, N},   {0x249C, 0x24E9, O},
    {0x24EA, 0x24FF, N}, {0x2500, 0x2BFF, O}, {0x2E00, 0x2E7F, O},   {0x3000, 0x3000, S},
    {0x3001, 0x3004, O}, {0x3008, 0x3020, O}, {0xE000, 0xF8FF, O},   {0xFE00, 0xFE1F, O},
    {0xFE30, 0xFE6F, O}, {0xFF01, 0xFF0F, O}, {0xFF10, 0xFF19, N},   {0xFF1A, 0xFF20, O},
    {0xFF3B, 0xFF40, O}, {0xFF5B, 0xFF65, O}, {0x1F000, 0x1FBFF, O},
};

constexpr bool SortedAndDisjoint() {
  for (size_t i = 0; i < std::size(kRanges); ++i) {
    if (kRanges[i].lo > kRanges[i].hi || (i > 0 && kRanges[i].lo <= kRanges[i - 1].hi)) {
      return false;
    }
  }
  return true;
}
static_assert(SortedAndDisjoint(), "the binary search needs sorted, disjoint ranges");

CharClass ClassifyCodePoint(char32_t cp) {
  const Range* end = std::end(kRanges);
  const Range* r = std::upper_bound(std::begin(kRanges), end, cp,
                                    [](char32_t c, const Range& x) { return c < x.lo; });
  if (r == std::begin(kRanges)) return L;
  --r;
  return cp <= r->hi ? r->cls : L;
}

// Decodes one strict UTF-8 sequence (no overlongs, surrogates or > U+10FFFF).
// Returns its length, or 0 if the bytes at pos do not start one.
int DecodeUtf8(std::string_view s, size_t pos, char32_t* cp) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  int len;
  char32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, min = 0x80, *cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, min = 0x800, *cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, min = 0x10000, *cp = b0 & 0x07;
  } else {
    return 0;
  }
  if (pos + len > s.size()) return 0;
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<uint8_t>(s[pos + k]);
    if ((b & 0xC0) != 0x80) return 0;
    *cp = (*cp << 6) | (b & 0x3F);
  }
  if (*cp < min || *cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF)) return 0;
  return len;
}

// The end of the run of characters of class `cls` that starts at pos.
size_t RunEnd(std::string_view text, size_t pos, CharClass cls) {
  while (pos < text.size()) {
    const CharInfo c = ClassifyChar(text, pos);
    if (c.cls != cls) break;
    pos += c.length;
  }
  return pos;
}

// Length of the contraction 's 't 're 've 'm 'll 'd at pos (an apostrophe), or 0.
size_t ContractionLength(std::string_view text, size_t pos) {
  const std::string_view rest = text.substr(pos + 1);
  if (rest.empty()) return 0;
  const char c = rest[0];
  if (c == 's' || c == 't' || c == 'm' || c == 'd') return 2;
  if (rest.size() >= 2) {
    const std::string_view two = rest.substr(0, 2);
    if (two == "re" || two == "ve" || two == "ll") return 3;
  }
  return 0;
}

}  // namespace

CharInfo ClassifyChar(std::string_view text, size_t pos) {
  const auto b = static_cast<uint8_t>(text[pos]);
  if (b < 0x80) return {kAscii[b], 1};
  char32_t cp;
  const int len = DecodeUtf8(text, pos, &cp);
  if (len == 0) return {L, 1};
  return {ClassifyCodePoint(cp), static_cast<uint8_t>(len)};
}

size_t PreTokenEnd(std::string_view text, size_t pos) {
  // 's|'t|'re|'ve|'m|'ll|'d
  if (text[pos] == '\'') {
    if (const size_t n = ContractionLength(text, pos)) return pos + n;
  }
  const CharInfo first = ClassifyChar(text, pos);
  // ' ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+': a space joins the run that follows.
  if (text[pos] == ' ' && pos + 1 < text.size()) {
    const CharInfo next = ClassifyChar(text, pos + 1);
    if (next.cls != S) return RunEnd(text, pos + 1, next.cls);
  }
  if (first.cls != S) return RunEnd(text, pos, first.cls);
  // '\s+(?!\S)|\s+': a run of white space gives its last character to the
  // word after it (as ' word'), unless the run is a single character.
  size_t end = pos;
  size_t last = pos;
  int count = 0;
  while (end < text.size()) {
    const CharInfo c = ClassifyChar(text, end);
    if (c.cls != S) break;
    last = end;
    end += c.length;
    ++count;
  }
  if (end == text.size() || count == 1) return end;
  return last;
}

}  // namespace anvil::data
