// GPT-2's byte-level alphabet: each of the 256 bytes is shown as one printable
// Unicode character, so that vocabularies and merges are valid UTF-8 text
// (Hugging Face ByteLevel). The mapping is a bijection; bytes are bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace anvil::data {

// The code point GPT-2's bytes_to_unicode() assigns to byte `b`: printable
// Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') map to themselves, the other 68
// bytes to U+0100.. in byte order (so ' ' is 'Ġ' U+0120 and '\n' is 'Ċ' U+010A).
char32_t ByteToCodePoint(uint8_t b);

// Appends the UTF-8 encoding of `cp` (which must be a valid scalar value).
void AppendUtf8(char32_t cp, std::string* out);

// The byte-level text of raw bytes: one character per byte.
std::string ToByteLevel(std::string_view bytes);

// The raw bytes of byte-level text. False (and *bytes unspecified) if `text`
// is not valid UTF-8 or holds a character outside the 256-character alphabet.
bool FromByteLevel(std::string_view text, std::string* bytes);

}  // namespace anvil::data
