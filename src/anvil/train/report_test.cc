// The run report: one <svg> per plot, both runs named and overlaid with
// --compare, the config text and the machine on the page, nothing fetched
// from elsewhere, and errors that name the metrics file and line. Metrics
// are written by the trainer's own MetricsWriter.
#include "anvil/train/report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "anvil/core/file_util.h"
#include "anvil/train/metrics.h"
#include "anvil/train/report_config.h"
#include "anvil/train/report_machine.h"
#include "anvil/train/report_plot.h"

namespace anvil::train {
namespace {

namespace fs = std::filesystem;

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string ConfigToml(double lr) {
  return "[model]\ndim = 64\nn_layers = 2\n\n[optim]\nlr = " + std::to_string(lr) +
         "\n\n[train]\nprecision = \"bf16\"\nsteps = 40\n";
}

class ReportTest : public ::testing::Test {
 protected:
  ReportTest()
      : root_((fs::temp_directory_path() /
               ("anvil_report_test_" + std::to_string(::getpid()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                  .string()) {
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~ReportTest() override { fs::remove_all(root_); }

  // A run folder as the trainer leaves it: config.toml, metrics.jsonl from
  // MetricsWriter (40 steps, validation every 10) and, optionally, machine.json.
  std::string MakeRun(const std::string& name, double lr, bool machine = true) {
    const std::string dir = root_ + "/" + name;
    EXPECT_TRUE(MakeDirectories(dir).ok());
    EXPECT_TRUE(WriteFileAtomic(dir + "/config.toml", ConfigToml(lr)).ok());
    auto writer = MetricsWriter::Open(dir + "/metrics.jsonl", -1);
    EXPECT_TRUE(writer.ok()) << writer.status().ToString();
    for (int64_t s = 1; s <= 40; ++s) {
      StepMetrics m{.step = s, .loss = 4 * std::exp(-lr * 10 * s) + 1, .lr = lr * std::min(1.0, s / 5.0),
                    .grad_norm = 1.0 / s, .tokens_per_s = 5000 + 10.0 * s, .mfu = 0.2,
                    .mem_high_water = (int64_t{100} << 20) + s, .tokens = 64 * s, .seconds = 0.01};
      (*writer)->Write(m);
      if (s % 10 == 0) (*writer)->Write(EvalMetrics{.step = s, .val_loss = m.loss + 0.1, .val_tokens = 64});
    }
    if (machine) {
      EXPECT_TRUE(WriteMachineJson(dir + "/machine.json",
                                   RunMachine{.threads = 2, .isa = "avx512", .precision = "bf16",
                                              .peak_gflops = 123.4, .peak_measured = false})
                      .ok());
    }
    return dir;
  }

  std::string Page(const ReportOptions& o) {
    auto path = WriteReport(o);
    EXPECT_TRUE(path.ok()) << path.status().ToString();
    if (!path.ok()) return "";
    auto text = ReadFile(*path);
    EXPECT_TRUE(text.ok());
    return text.ok() ? *text : "";
  }

  // The page must open offline: no URL, no external script, style, font or image.
  static void ExpectSelfContained(const std::string& html) {
    for (const char* bad : {"http://", "https://", "src=", "<script", "<link", "@import", "url("}) {
      EXPECT_EQ(html.find(bad), std::string::npos) << bad;
    }
  }

  std::string root_;
};

TEST_F(ReportTest, OneRun) {
  const std::string dir = MakeRun("tiny", 0.01);
  auto path = WriteReport({.run_dir = dir});
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  EXPECT_EQ(*path, dir + "/report.html");
  const std::string html = *ReadFile(*path);
  EXPECT_EQ(Count(html, "<svg"), 6u);  // loss+val, lr, grad norm, tokens/s, MFU, memory
  EXPECT_EQ(Count(html, "</svg>"), 6u);
  for (const char* title : {"Loss", "Learning rate", "Gradient norm", "Throughput",
                            "Model FLOPs utilisation", "Memory high-water"}) {
    EXPECT_NE(html.find(std::string(">") + title + "</text>"), std::string::npos) << title;
  }
  EXPECT_NE(html.find("validation"), std::string::npos);
  EXPECT_NE(html.find("dim = 64"), std::string::npos);  // the config text
  EXPECT_NE(html.find("precision = &quot;bf16&quot;"), std::string::npos);
  EXPECT_NE(html.find("SIMD tier used"), std::string::npos);  // machine.json
  EXPECT_NE(html.find("123.4"), std::string::npos);
  EXPECT_EQ(html.find("Differing keys"), std::string::npos);
  ExpectSelfContained(html);
}

TEST_F(ReportTest, CompareOverlaysBothRuns) {
  const std::string a = MakeRun("lr_high", 0.01);
  const std::string b = MakeRun("lr_low", 0.003, /*machine=*/false);
  const std::string out = root_ + "/cmp.html";
  const std::string html = Page({.run_dir = a, .compare_dir = b, .out = out});
  EXPECT_TRUE(fs::exists(out));
  EXPECT_FALSE(fs::exists(a + "/report.html"));
  EXPECT_EQ(Count(html, "<svg"), 6u);
  EXPECT_NE(html.find("lr_high"), std::string::npos);
  EXPECT_NE(html.find("lr_low"), std::string::npos);
  // Every plot draws both runs (one colour each) and names them in its legend.
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) {
    const std::string svg = html.substr(at, html.find("</svg>", at) - at);
    EXPECT_GE(Count(svg, "<polyline"), 2u);
    EXPECT_NE(svg.find("lr_high"), std::string::npos);
    EXPECT_NE(svg.find("lr_low"), std::string::npos);
  }
  // optim.lr differs, and only it.
  EXPECT_NE(html.find("Differing keys"), std::string::npos);
  EXPECT_NE(html.find("<code>optim.lr</code>"), std::string::npos);
  EXPECT_EQ(Count(html, "<span class=\"diff\">"), 2u);  // its line in each config
  EXPECT_NE(html.find("machine unknown"), std::string::npos);  // run b has no machine.json
  ExpectSelfContained(html);
}

TEST_F(ReportTest, SameFolderNamesAreTold) {
  const std::string a = MakeRun("x/run", 0.01);
  const std::string b = MakeRun("y/run", 0.003);
  const std::string html = Page({.run_dir = a, .compare_dir = b});
  EXPECT_NE(html.find("x/run"), std::string::npos);
  EXPECT_NE(html.find("y/run"), std::string::npos);
}

TEST_F(ReportTest, ErrorsNameTheFileAndLine) {
  auto missing = WriteReport({.run_dir = root_ + "/nope"});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(root_ + "/nope: no such run folder"), std::string::npos)
      << missing.status().message();

  const std::string dir = MakeRun("bad", 0.01);
  const std::string metrics = dir + "/metrics.jsonl";
  fs::remove(metrics);
  auto no_metrics = WriteReport({.run_dir = dir});
  ASSERT_FALSE(no_metrics.ok());
  EXPECT_NE(no_metrics.status().message().find(metrics + ": not found"), std::string::npos)
      << no_metrics.status().message();

  ASSERT_TRUE(WriteFileAtomic(metrics, "").ok());
  auto empty = WriteReport({.run_dir = dir});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find(metrics + ": empty"), std::string::npos)
      << empty.status().message();

  const std::string good = R"({"step":1,"loss":3.0,"lr":0.1})";
  ASSERT_TRUE(WriteFileAtomic(metrics, good + "\n" + good + "\n{\"step\":3,\"loss\":2.\n").ok());
  auto corrupt = WriteReport({.run_dir = dir});
  ASSERT_FALSE(corrupt.ok());
  EXPECT_NE(corrupt.status().message().find(metrics + ":3: not valid JSON"), std::string::npos)
      << corrupt.status().message();

  ASSERT_TRUE(WriteFileAtomic(metrics, good + "\n{\"step\":2,\"loss\":\"low\"}\n").ok());
  auto wrong_type = WriteReport({.run_dir = dir});
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.status().message().find(metrics + ":2: \"loss\" is not a number"),
            std::string::npos)
      << wrong_type.status().message();

  ASSERT_TRUE(WriteFileAtomic(metrics, good + "\n[1,2]\n").ok());
  auto not_metrics = WriteReport({.run_dir = dir});
  ASSERT_FALSE(not_metrics.ok());
  EXPECT_NE(not_metrics.status().message().find(metrics + ":2: not a metrics line"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir + "/report.html"));
}

TEST_F(ReportTest, MissingFieldsAndNoValidationStillRender) {
  // An older or partial file: no val_loss lines, some fields absent.
  const std::string dir = root_ + "/partial";
  ASSERT_TRUE(MakeDirectories(dir).ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/metrics.jsonl",
                              "{\"step\":1,\"loss\":3.5}\n{\"step\":2,\"loss\":3.1,\"lr\":0.001}\n")
                  .ok());
  const std::string html = Page({.run_dir = dir});
  EXPECT_EQ(Count(html, "<svg"), 6u);
  EXPECT_NE(html.find("validation (no data)"), std::string::npos);
  EXPECT_NE(html.find(">no data</text>"), std::string::npos);  // grad norm etc.
  EXPECT_NE(html.find("config.toml: no such file"), std::string::npos);
  EXPECT_NE(html.find("machine unknown"), std::string::npos);
  ExpectSelfContained(html);
}

// `anvil sft` / `anvil rl` folders: their held-out accuracy lines (no loss)
// and rl steps (a reward, no tokens/s) render, with an accuracy and a
// reward plot besides the trainer's six, and the final accuracy in the
// summary.
TEST_F(ReportTest, PostTrainingRunsRender) {
  const std::string dir = root_ + "/rl";
  ASSERT_TRUE(MakeDirectories(dir).ok());
  ASSERT_TRUE(WriteFileAtomic(dir + "/metrics.jsonl",
                              "{\"step\":0,\"heldout_accuracy\":0.3,\"eval_seconds\":0.01}\n"
                              "{\"step\":1,\"lr\":1e-5,\"reward\":0.2,\"loss\":0.01}\n"
                              "{\"step\":2,\"lr\":2e-5,\"reward\":0.4,\"loss\":0.02}\n"
                              "{\"step\":2,\"heldout_accuracy\":0.55,\"eval_seconds\":0.01}\n")
                  .ok());
  const std::string html = Page({.run_dir = dir});
  EXPECT_EQ(Count(html, "<svg"), 8u);
  EXPECT_NE(html.find("Held-out accuracy"), std::string::npos);
  EXPECT_NE(html.find(">Reward<"), std::string::npos);
  EXPECT_NE(html.find("55.0 % (step 2)"), std::string::npos);
  ExpectSelfContained(html);
}

TEST(ReportPlotTest, NiceTicksBracketTheData) {
  EXPECT_EQ(NiceTicks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  const std::vector<double> t = NiceTicks(2.37, 9.1, 5);
  ASSERT_GE(t.size(), 3u);
  EXPECT_LE(t.front(), 2.37);
  EXPECT_GE(t.back(), 9.1);
  EXPECT_EQ(t.front(), 2);
  const std::vector<double> small = NiceTicks(1e-4, 1e-3, 5);
  EXPECT_LE(small.front(), 1e-4);
  EXPECT_GE(small.back(), 1e-3 * (1 - 1e-9));
}

TEST(ReportPlotTest, TickLabelsAreShort) {
  EXPECT_EQ(FormatTick(0, 1), "0");
  EXPECT_EQ(FormatTick(2.5, 0.5), "2.5");
  EXPECT_EQ(FormatTick(400, 100), "400");
  EXPECT_EQ(FormatTick(12000, 2000), "12k");
  EXPECT_EQ(FormatTick(1500, 500), "1.5k");
  EXPECT_EQ(FormatTick(3e6, 1e6), "3M");
  EXPECT_EQ(FormatTick(0.002, 0.001), "0.002");
  EXPECT_EQ(FormatTick(4e-5, 2e-5), "4e-05");
}

TEST(ReportPlotTest, EscapesText) {
  EXPECT_EQ(HtmlEscape("a<b & \"c\""), "a&lt;b &amp; &quot;c&quot;");
  const std::string svg = SvgLinePlot({.title = "<t>", .y_label = "y"},
                                      {{.label = "s&s", .color = "#000", .points = {{1, 2}, {2, 3}}}});
  EXPECT_NE(svg.find("&lt;t&gt;"), std::string::npos);
  EXPECT_NE(svg.find("s&amp;s"), std::string::npos);
}

TEST(ReportConfigTest, DifferingKeys) {
  const auto a = ConfigEntries("[model]\ndim = 64\n[optim]\nlr = 0.01\n");
  const auto b = ConfigEntries("[model]\ndim = 64\n[optim]\nlr = 0.02\nbeta1 = 0.9\n");
  EXPECT_EQ(a.at("model.dim"), "64");
  EXPECT_EQ(DifferingKeys(a, b), (std::set<std::string>{"optim.beta1", "optim.lr"}));
}

}  // namespace
}  // namespace anvil::train
