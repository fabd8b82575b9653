// The AVX2 tier's AVX-VNNI integer kernels give the plain AVX2 kernels'
// outputs bit for bit (both form exact integer sums; the epilogue is one
// order): every row count, full and ragged panels, partial int4 groups, with
// and without accumulate. The end-to-end test (gemm_int_test.cc) checks
// whichever set the CPU selects against the oracle; this one keeps the other
// set checked on a CPU with AVX-VNNI.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "anvil/core/aligned_buffer.h"
#include "anvil/core/cpu_features.h"
#include "anvil/kernels/cpu/gemm_int_internal.h"

namespace anvil::kernels::gemm_int_internal {
namespace {

constexpr int64_t kLinesPerGroup = 16;  // int4: 128 k of 8 per line

// One panel of weights and `rows` activation rows over its K, consistent as
// gemm_int.cc packs them (q_u8 = q + 128, the columns' and groups' sums).
struct Panel {
  AlignedBuffer lines;
  std::vector<float> scales, row_scales, y0;
  std::vector<int32_t> column_sums, group_sums;
  std::vector<int8_t> q;
  std::vector<uint8_t> q_u8;
  PanelTask task;

  Panel(bool int4, int64_t lines_count, int rows, int columns, bool accumulate, uint32_t seed)
      : lines(static_cast<size_t>(lines_count) * 64) {
    std::mt19937 rng(seed);
    const int64_t per_line = int4 ? 8 : 4, k = lines_count * per_line;
    const int64_t groups = int4 ? (lines_count + kLinesPerGroup - 1) / kLinesPerGroup : 1;
    auto code = [&](int lo, int hi) { return lo + static_cast<int>(rng() % (hi - lo + 1)); };
    std::vector<int> w(static_cast<size_t>(k * 16));  // [k, 16]
    for (int& v : w) v = int4 ? code(-8, 7) : code(-127, 127);
    auto* bytes = reinterpret_cast<uint8_t*>(lines.data());
    column_sums.assign(16, 0);
    for (int64_t l = 0; l < lines_count; ++l) {
      for (int j = 0; j < 16; ++j) {
        for (int b = 0; b < 4; ++b) {
          uint8_t& byte = bytes[l * 64 + 4 * j + b];
          if (int4) {  // nibbles qw + 8: k = 8 l + b low, 8 l + 4 + b high
            byte = static_cast<uint8_t>((w[(8 * l + b) * 16 + j] + 8) |
                                        ((w[(8 * l + 4 + b) * 16 + j] + 8) << 4));
          } else {
            byte = static_cast<uint8_t>(static_cast<int8_t>(w[(4 * l + b) * 16 + j]));
            column_sums[j] += w[(4 * l + b) * 16 + j];
          }
        }
      }
    }
    std::uniform_real_distribution<float> unit(0.5f, 2.0f);
    scales.resize(static_cast<size_t>(groups * 16));
    for (float& s : scales) s = unit(rng) * 1e-3f;
    q.resize(static_cast<size_t>(rows * k));
    q_u8.resize(q.size());
    for (size_t i = 0; i < q.size(); ++i) {
      q[i] = static_cast<int8_t>(code(-127, 127));
      q_u8[i] = static_cast<uint8_t>(q[i] + 128);
    }
    row_scales.resize(rows);
    for (float& s : row_scales) s = unit(rng) * 1e-2f;
    group_sums.assign(static_cast<size_t>(rows * groups), 0);  // int4's, per 128 k
    for (int r = 0; int4 && r < rows; ++r) {
      for (int64_t kk = 0; kk < k; ++kk) {
        group_sums[r * groups + kk / (kLinesPerGroup * 8)] += q[r * k + kk];
      }
    }
    y0.resize(static_cast<size_t>(rows * 16));
    for (float& v : y0) v = unit(rng) - 1.25f;
    task.lines_data = bytes;
    task.lines = lines_count;
    task.lines_per_group = int4 ? kLinesPerGroup : lines_count;
    task.groups = groups;
    task.scales = scales.data();
    task.scale_stride = 16;
    task.column_sums = column_sums.data();
    task.q = q.data();
    task.q_u8 = q_u8.data();
    task.ld = k;
    task.row_scales = row_scales.data();
    task.group_sums = group_sums.data();
    task.rows = rows;
    task.ldy = 16;
    task.columns = columns;
    task.accumulate = accumulate;
  }

  std::vector<float> Run(PanelFn fn) {
    std::vector<float> y = y0;
    PanelTask t = task;
    t.y = y.data();
    fn(t);
    return y;
  }
};

TEST(GemmIntAvxVnniTest, SameBitsAsTheAvx2Kernels) {
  if (!GetCpuFeatures().avx2 || !GetCpuFeatures().avx_vnni) {
    GTEST_SKIP() << "no AVX-VNNI on this CPU";
  }
  const Kernels& avx2 = Avx2Kernels();
  const Kernels& vnni = AvxVnniKernels();
  ASSERT_EQ(avx2.max_rows, vnni.max_rows);
  uint32_t seed = 1;
  for (const bool int4 : {false, true}) {
    for (const int64_t lines : {1, 7, 16, 37}) {  // int4: one group, a partial third
      for (int rows = 1; rows <= vnni.max_rows; ++rows) {
        for (const int columns : {16, 11, 5}) {
          for (const bool accumulate : {false, true}) {
            Panel p(int4, lines, rows, columns, accumulate, seed++);
            const std::vector<float> want = p.Run(int4 ? avx2.int4 : avx2.int8);
            const std::vector<float> got = p.Run(int4 ? vnni.int4 : vnni.int8);
            ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * 4), 0)
                << (int4 ? "int4" : "int8") << " lines " << lines << " rows " << rows << " columns "
                << columns << (accumulate ? " accumulate" : "");
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace anvil::kernels::gemm_int_internal
