// The byte <-> character tables of GPT-2's byte-level alphabet, built once.
#include "anvil/data/byte_level.h"

#include <array>

namespace anvil::data {
namespace {

struct Tables {
  std::array<char32_t, 256> to_cp{};
  // Inverse over the code points used (all below U+0144); -1 where unused.
  std::array<int16_t, 0x144> to_byte{};

  Tables() {
    to_byte.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      to_cp[b] = printable(b) ? static_cast<char32_t>(b) : next++;
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

}  // namespace

char32_t ByteToCodePoint(uint8_t b) { return GetTables().to_cp[b]; }

void AppendUtf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string ToByteLevel(std::string_view bytes) {
  const Tables& t = GetTables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) AppendUtf8(t.to_cp[static_cast<uint8_t>(c)], &out);
  return out;
}

bool FromByteLevel(std::string_view text, std::string* bytes) {
  const Tables& t = GetTables();
  bytes->clear();
  for (size_t i = 0; i < text.size();) {
    const auto c0 = static_cast<uint8_t>(text[i]);
    char32_t cp;
    if (c0 < 0x80) {
      cp = c0;
      i += 1;
    } else if ((c0 & 0xE0) == 0xC0 && i + 1 < text.size() &&
               (static_cast<uint8_t>(text[i + 1]) & 0xC0) == 0x80) {
      // The whole alphabet lies below U+0800: two bytes at most.
      cp = (char32_t{c0 & 0x1Fu} << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3F);
      if (cp < 0x80) return false;  // overlong
      i += 2;
    } else {
      return false;
    }
    if (cp >= t.to_byte.size() || t.to_byte[cp] < 0) return false;
    bytes->push_back(static_cast<char>(t.to_byte[cp]));
  }
  return true;
}

}  // namespace anvil::data
