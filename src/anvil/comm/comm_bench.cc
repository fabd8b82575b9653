// Collective throughput on this job's ranks, one JSON line per case (rank 0):
//   scripts/mpirun_test.sh 2 build/release/bin/comm_bench
// bus_gbps is the data a ring would move per rank ((N-1)/N of the buffer for
// reduce-scatter and all-gather, twice that for all-reduce) over the median
// time. The peer is Open MPI's own collective on the same buffers
// (MPI_Allreduce, MPI_Reduce_scatter, MPI_Allgatherv: its tuned algorithms,
// whose sums are not in rank order), called from this thread while anvil's
// communication thread is idle.
#include <mpi.h>
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "anvil/comm/world.h"

int main() {
  using namespace anvil::comm;
  auto world = InitWorld();
  if (!world.ok()) return 1;
  Group& g = **world;
  const int n = g.size();
  for (int64_t count : {int64_t{1} << 10, int64_t{1} << 16, int64_t{1} << 20, int64_t{1} << 23}) {
    std::vector<float> buf(count, 1.0f);
    const std::vector<int64_t> counts = SplitEvenly(count, n, 16);
    std::vector<int> icounts(n), displs(n);
    for (int r = 0, d = 0; r < n; ++r) {
      icounts[r] = static_cast<int>(counts[r]);
      displs[r] = d;
      d += icounts[r];
    }
    std::vector<float> out(count);
    for (const char* kind : {"all_reduce", "reduce_scatter", "all_gather"}) {
      const bool all_reduce = kind[4] == 'r';
      double median[2];
      for (int peer = 0; peer < 2; ++peer) {
        std::vector<double> times;
        for (int rep = 0; rep < 9; ++rep) {
          g.Barrier();
          const auto t0 = std::chrono::steady_clock::now();
          int64_t off = 0;
          for (int r = 0; r < g.rank(); ++r) off += counts[r];
          const std::span<float> mine(buf.data() + off, counts[g.rank()]);
          if (peer == 1) {
            if (all_reduce) {
              MPI_Allreduce(MPI_IN_PLACE, buf.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM,
                            MPI_COMM_WORLD);
            } else if (kind[0] == 'r') {
              MPI_Reduce_scatter(buf.data(), out.data(), icounts.data(), MPI_FLOAT, MPI_SUM,
                                 MPI_COMM_WORLD);
            } else {
              MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, buf.data(), icounts.data(), displs.data(),
                             MPI_FLOAT, MPI_COMM_WORLD);
            }
          } else if (all_reduce) {
            g.AllReduce(std::span<float>(buf));
          } else if (kind[0] == 'r') {
            g.ReduceScatter(std::span<const float>(buf), mine, std::span<const int64_t>(counts));
          } else {
            g.AllGather(std::span<const float>(mine), std::span<float>(buf),
                        std::span<const int64_t>(counts));
          }
          times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        std::sort(times.begin(), times.end());
        median[peer] = times[times.size() / 2];
      }
      const double factor = (all_reduce ? 2.0 : 1.0) * (n - 1) / n;
      if (g.rank() == 0) {
        fmt::print("{{\"op\":\"{}\",\"ranks\":{},\"bytes\":{},\"median_us\":{:.1f},"
                   "\"bus_gbps\":{:.2f},\"openmpi_median_us\":{:.1f},\"anvil_over_openmpi\":{:.2f}}}\n",
                   kind, n, count * 4, median[0] * 1e6, factor * count * 4 / median[0] / 1e9,
                   median[1] * 1e6, median[1] / median[0]);
      }
    }
  }
  FinalizeWorld();
  return 0;
}
