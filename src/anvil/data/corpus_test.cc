// Corpora: Brown annotation back to running text (expected text written by
// hand), text folders in sorted order with bytes kept as bytes, locating the
// Brown corpus, and errors for missing, empty or unreadable input.
#include "anvil/data/corpus.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "anvil/data/testing.h"

namespace anvil::data {
namespace {

TEST(Brown, RecoversRunningText) {
  // Two paragraphs of ca01 and a fiction-style one with quotes; sentence lines
  // are tab-indented, paragraphs separated by blank lines.
  const std::string tagged =
      "\n\n\tThe/at Fulton/np-tl County/nn-tl Grand/jj-tl Jury/nn-tl said/vbd Friday/nr an/at "
      "investigation/nn of/in Atlanta's/np$ recent/jj primary/nn election/nn produced/vbd ``/`` "
      "no/at evidence/nn ''/'' that/cs any/dti irregularities/nns took/vbd place/nn ./.\n\n\n"
      "\t``/`` Only/rb a/at relative/jj handful/nn of/in such/jj reports/nns was/bedz received/vbn "
      "''/'' ,/, the/at jury/nn said/vbd ,/, ``/`` considering/in the/at widespread/jj "
      "interest/nn ''/'' ./.\n"
      "It/pps cost/vbd $4/nns (/( 1/2/cd of/in it/ppo )/) ;/. ;/. and/or/cc what/wdt ?/.\n\n\n"
      "\tHe/pps said/vbd ,/, '/' See/vb Joe/np '/' ''/'' ./.\n"
      "They/ppss didn't/dod* know/vb ca/md n't/* go/vb //in 'em/ppo !/.\n";
  const std::string expected =
      "The Fulton County Grand Jury said Friday an investigation of Atlanta's recent primary "
      "election produced \"no evidence\" that any irregularities took place.\n"
      "\"Only a relative handful of such reports was received\", the jury said, \"considering "
      "the widespread interest\". It cost $4 (1/2 of it);; and/or what?\n"
      "He said, 'See Joe'\". They didn't know can't go / 'em!\n";
  EXPECT_EQ(BrownToText(tagged), expected);
  EXPECT_EQ(BrownToText(""), "");
  EXPECT_EQ(BrownToText("\n\n  \n"), "");
  EXPECT_EQ(BrownToText("word/nn"), "word\n");  // no trailing newline in the input
}

TEST(TextCorpus, ReadsAFolderInSortedOrder) {
  testing::TempDir dir;
  testing::WriteBytes(dir / "b.txt", "second");
  testing::WriteBytes(dir / "a.txt", std::string("first\0\xff\xfe", 8));  // bytes are bytes
  testing::WriteBytes(dir / "sub/c.txt", "third");
  testing::WriteBytes(dir / "empty.txt", "");
  testing::WriteBytes(dir / ".hidden", "skipped");
  testing::WriteBytes(dir / ".git/config", "skipped");
  auto c = ReadTextCorpus(dir.path());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->documents.size(), 3u);
  EXPECT_EQ(c->documents[0].name, "a.txt");
  EXPECT_EQ(c->documents[0].text, std::string("first\0\xff\xfe", 8));
  EXPECT_EQ(c->documents[1].name, "b.txt");
  EXPECT_EQ(c->documents[2].name, "sub/c.txt");
  EXPECT_EQ(c->bytes, 8 + 6 + 5);
  EXPECT_EQ(c->empty_files_skipped, 1);
  auto one = ReadTextCorpus(dir / "b.txt");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->documents.size(), 1u);
}

TEST(TextCorpus, ErrorsNameThePathAndTheProblem) {
  testing::TempDir dir;
  auto expect = [](const Result<Corpus>& r, StatusCode code, const std::string& what) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code) << r.status().ToString();
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().ToString();
  };
  expect(ReadTextCorpus(dir / "missing"), StatusCode::kNotFound, "missing: no such file or folder");
  std::filesystem::create_directories(dir / "none");
  expect(ReadTextCorpus(dir / "none"), StatusCode::kInvalidArgument,
         "none: the folder holds no files");
  testing::WriteBytes(dir / "blank/x", "");
  testing::WriteBytes(dir / "blank/y", "");
  expect(ReadTextCorpus(dir / "blank"), StatusCode::kInvalidArgument, "all 2 files are empty");
  expect(ReadTextCorpus(dir / "blank/x"), StatusCode::kInvalidArgument, "x: the file is empty");
  if (::geteuid() != 0) {  // root reads anything
    testing::WriteBytes(dir / "locked/z", "secret");
    std::filesystem::permissions(dir / "locked/z", std::filesystem::perms::none);
    expect(ReadTextCorpus(dir / "locked"), StatusCode::kIoError, "z: cannot open");
  }
}

TEST(Brown, FoundThroughTheEnvironment) {
  testing::TempDir dir;
  testing::WriteBytes(dir / "cb02", "Second/at file/nn ./.\n");
  testing::WriteBytes(dir / "ca01", "First/at ./.\n\n\tNew/jj paragraph/nn ./.\n");
  testing::WriteBytes(dir / "README", "not a document");
  testing::WriteBytes(dir / "cats.txt", "ca01 news");
  ::setenv("ANVIL_BROWN_DIR", dir.path().c_str(), 1);
  auto c = ReadCorpus("brown");
  ::unsetenv("ANVIL_BROWN_DIR");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->source, "brown");
  ASSERT_EQ(c->documents.size(), 2u);
  EXPECT_EQ(c->documents[0].name, "ca01");
  EXPECT_EQ(c->documents[0].text, "First.\nNew paragraph.\n");
  EXPECT_EQ(c->documents[1].text, "Second file.\n");

  ::setenv("ANVIL_BROWN_DIR", (dir / "nowhere").c_str(), 1);
  auto missing = ReadCorpus("brown");
  ::unsetenv("ANVIL_BROWN_DIR");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("scripts/setup.sh"), std::string::npos);
  EXPECT_NE(missing.status().message().find("nowhere"), std::string::npos);
}

}  // namespace
}  // namespace anvil::data
