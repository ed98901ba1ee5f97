// padata_do_multithreaded (kernel/padata.c, v6.9 + the v6.11 chunk_size fix): the arithmetic against a literal
// transcription of the kernel's code for a table of jobs, the chunk hand-out, the works pool, numa_aware node
// choice, and a real multithreaded run that covers every item exactly once.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <vector>

#include "alloclab/kernel/padata.hpp"
#include "alloclab/locks/lock_domain.hpp"

using namespace alloclab;

namespace {

// The kernel's padata_do_multithreaded arithmetic, transcribed (unsigned long, C integer division), with
// `pool` works available in padata_free_works.
struct Ref {
  unsigned long nworks;  // ps.nworks (0: size == 0)
  unsigned long chunk_size;
  unsigned long chunks;
};
Ref kernel_ref(unsigned long start, unsigned long size, unsigned long min_chunk, unsigned long align, int max_threads,
               int pool) {
  if (size == 0) return {0, 0, 0};
  unsigned long nworks = std::max(size / std::max(min_chunk, align), 1ul);
  nworks = std::min(nworks, (unsigned long)max_threads);
  if (nworks == 1) return {1, size, 1};
  int i;  // padata_work_alloc_mt
  for (i = 1; i < int(nworks) && pool > 0; ++i) --pool;
  const unsigned long ps_nworks = (unsigned long)i;
  unsigned long chunk = size / (ps_nworks * 4);
  chunk = std::max(chunk, min_chunk);
  chunk = std::max(chunk, 1ul);
  chunk = ((chunk + align - 1) / align) * align;
  unsigned long chunks = 0;
  while (size > 0) {  // padata_mt_helper
    unsigned long n = ((start + 1 + chunk - 1) / chunk) * chunk - start;
    n = std::min(n, size);
    start += n;
    size -= n;
    ++chunks;
  }
  return {ps_nworks, chunk, chunks};
}

struct Case {
  unsigned long start, size, min_chunk, align;
  int max_threads;
  // hand-computed expectations (0 = not given)
  unsigned long nworks, chunk_size, chunks;
};

padata_mt_job job_of(const Case& c) {
  padata_mt_job j;
  j.start = c.start;
  j.size = c.size;
  j.min_chunk = c.min_chunk;
  j.align = c.align;
  j.max_threads = c.max_threads;
  return j;
}

}  // namespace

TEST(Padata, ArithmeticMatchesTheKernelFormula) {
  const std::vector<Case> cases = {
      // hugetlb 2M (min_chunk = size / nodes / k): exactly one chunk per worker
      {0, 131072, 131072 / 2 / 2, 1, 2 * 2, 4, 32768, 4},     // 256G on 2 nodes, k = 2
      {0, 1048576, 1048576 / 4 / 5, 1, 4 * 5, 20, 52428, 0},  // 2T on 4 nodes, k = 5
      {0, 25600, 25600 / 2 / 1, 1, 2 * 1, 2, 12800, 2},       // 50G on 2 nodes, k = 1
      {0, 4096, 4096 / 1 / 2, 1, 1 * 2, 2, 2048, 2},          // 1 node, k = 2
      {0, 4096, 4096 / 1 / 1, 1, 1 * 1, 1, 4096, 1},          // 1 node, k = 1: inline
      {0, 10, 10 / 2 / 2, 1, 2 * 2, 4, 2, 5},                 // 5 chunks for 4 workers
      {0, 3, 3 / 2 / 2, 1, 2 * 2, 3, 1, 3},                   // min_chunk 0: chunk_size forced to 1
      {0, 1, 1 / 2 / 1, 1, 2, 1, 1, 1},
      {0, 7, 7 / 3 / 3, 1, 9, 7, 1, 7},
      // gigantic: size = nr_node_ids, min_chunk 1, max_threads = nodes
      {0, 4, 1, 1, 4, 4, 1, 4},
      {0, 2, 1, 1, 2, 2, 1, 2},
      // generic jobs
      {0, 100, 7, 4, 8, 8, 8, 13},    // chunk 7 rounded up to align 4
      {0, 100, 2, 10, 4, 4, 10, 10},  // align dominates min_chunk in nworks
      {0, 5, 10, 1, 8, 1, 5, 1},      // size < min_chunk: one inline call
      {5, 20, 8, 1, 2, 2, 8, 4},      // start 5: [5,8) [8,16) [16,24) [24,25)
      {0, 1000, 0, 1, 16, 16, 15, 67},
      {0, 0, 1, 1, 4, 0, 0, 0},  // size 0: nothing runs
      {0, 65536, 1, 1, 64, 64, 256, 256},
      {3, 999, 13, 8, 6, 6, 48, 0},
  };
  for (const Case& c : cases) {
    const padata_mt_job j = job_of(c);
    const Ref ref = kernel_ref(c.start, c.size, c.min_chunk, c.align, c.max_threads, 1 << 20);
    PadataInstance pinst(1 << 20, {true});
    const PadataPlan p = padata_plan(pinst, j);
    SCOPED_TRACE("size " + std::to_string(c.size) + " min_chunk " + std::to_string(c.min_chunk) + " align " +
                 std::to_string(c.align) + " max_threads " + std::to_string(c.max_threads));
    EXPECT_EQ(static_cast<unsigned long>(p.nworks), ref.nworks);
    EXPECT_EQ(p.chunk_size, ref.chunk_size);
    EXPECT_EQ(p.nr_chunks, ref.chunks);
    EXPECT_EQ(static_cast<unsigned long>(p.nworks), c.nworks);
    EXPECT_EQ(p.chunk_size, c.chunk_size);
    if (c.chunks) {
      EXPECT_EQ(p.nr_chunks, c.chunks);
    }
    EXPECT_EQ(
        padata_nworks(j),
        c.size ? std::min(std::max(c.size / std::max(c.min_chunk, c.align), 1ul), (unsigned long)c.max_threads) : 0ul);
  }
}

TEST(Padata, HugetlbMinChunkIsOneChunkPerWorkerWhenPagesDivide) {
  // min_chunk = pages / nodes / k, max_threads = k * nodes: when nodes * k divides pages, chunks == nworks.
  for (unsigned long nodes : {1ul, 2ul, 3ul, 4ul, 8ul})
    for (unsigned long k : {1ul, 2ul, 3ul, 4ul, 5ul})
      for (unsigned long mult : {1ul, 7ul, 64ul}) {
        const unsigned long pages = nodes * k * mult;
        padata_mt_job j;
        j.size = pages;
        j.min_chunk = pages / nodes / k;
        j.max_threads = int(nodes * k);
        PadataInstance pinst(1 << 20, {true});
        const PadataPlan p = padata_plan(pinst, j);
        EXPECT_EQ(static_cast<unsigned long>(p.nworks), nodes * k);
        EXPECT_EQ(p.chunk_size, mult);
        EXPECT_EQ(p.nr_chunks, nodes * k);
      }
}

TEST(Padata, ChunksTileTheRangeAlignedToTheChunkSize) {
  for (unsigned long start : {0ul, 1ul, 5ul, 63ul})
    for (unsigned long size : {1ul, 2ul, 17ul, 100ul, 1000ul})
      for (unsigned long chunk : {1ul, 3ul, 8ul, 64ul}) {
        const auto chunks = padata_chunks(start, size, chunk);
        unsigned long at = start;
        for (size_t i = 0; i < chunks.size(); ++i) {
          EXPECT_EQ(chunks[i].first, at);
          EXPECT_GT(chunks[i].second, chunks[i].first);
          EXPECT_LE(chunks[i].second - chunks[i].first, chunk);
          if (i + 1 < chunks.size()) {
            EXPECT_EQ(chunks[i].second % chunk, 0u);  // "end is chunk size aligned"
          }
          at = chunks[i].second;
        }
        EXPECT_EQ(at, start + size);
      }
  EXPECT_THROW(padata_chunks(0, 10, 0), std::invalid_argument);
}

TEST(Padata, TheWorksPoolLimitsHelpersAndChunkSizeFollowsIt) {
  padata_mt_job j;
  j.size = 1024;
  j.min_chunk = 1;
  j.max_threads = 8;
  PadataInstance pinst(2, {true});  // num_possible_cpus() = 2: two helpers at most
  const PadataPlan p = padata_plan(pinst, j);
  EXPECT_EQ(p.nworks_wanted, 8u);
  EXPECT_EQ(p.nworks, 3);
  EXPECT_EQ(p.chunk_size, 1024u / (3 * 4));
  const Ref ref = kernel_ref(0, 1024, 1, 1, 8, 2);
  EXPECT_EQ(static_cast<unsigned long>(p.nworks), ref.nworks);
  EXPECT_EQ(p.chunk_size, ref.chunk_size);
  EXPECT_EQ(pinst.free_works(), 0);
  // A second job while the first holds the pool: the caller alone (ps.nworks = 1 with chunking).
  const PadataPlan q = padata_plan(pinst, j);
  EXPECT_EQ(q.nworks, 1);
  pinst.padata_works_free(p.nworks - 1);
  EXPECT_EQ(pinst.free_works(), 2);
}

TEST(Padata, NumaAwareHelpersGoRoundRobinOverCpuNodesFromLastUsedNid) {
  padata_mt_job j;
  j.size = 800;
  j.min_chunk = 100;
  j.max_threads = 8;
  j.numa_aware = true;
  PadataInstance pinst(64, {true, true, true, true});
  const PadataPlan p = padata_plan(pinst, j);
  ASSERT_EQ(p.nworks, 8);
  EXPECT_EQ(p.work_nodes, (std::vector<int>{-1, 1, 2, 3, 0, 1, 2, 3}));  // next_node_in(0) first
  // last_used_nid is function-static: the next job continues where this one stopped.
  padata_mt_job j2 = j;
  j2.max_threads = 3;
  const PadataPlan p2 = padata_plan(pinst, j2);
  EXPECT_EQ(p2.work_nodes, (std::vector<int>{-1, 0, 1}));
  // Nodes without CPUs are skipped.
  PadataInstance sparse(64, {true, false, true, false});
  EXPECT_EQ(padata_plan(sparse, j).work_nodes, (std::vector<int>{-1, 2, 0, 2, 0, 2, 0, 2}));
  // Without numa_aware no node is chosen.
  j.numa_aware = false;
  PadataInstance plain(64, {true, true});
  const PadataPlan q = padata_plan(plain, j);
  EXPECT_TRUE(std::all_of(q.work_nodes.begin(), q.work_nodes.end(), [](int n) { return n == -1; }));
  EXPECT_EQ(next_node_in(3, {true, true, true, true}), 0);
  EXPECT_EQ(next_node_in(-1, {false, true}), 1);
  EXPECT_EQ(next_node_in(0, {false, false}), -1);
}

TEST(Padata, MultithreadedRunCoversEveryItemOnceInTheKernelsChunks) {
  LockDomain locks(LockConfig{}, false, false);
  for (int max_threads : {1, 2, 4, 7}) {
    for (unsigned long size : {1ul, 37ul, 1000ul, 4096ul}) {
      padata_mt_job j;
      j.start = 11;
      j.size = size;
      j.min_chunk = size / unsigned(max_threads) / 2;
      j.max_threads = max_threads;
      std::vector<std::atomic<int>> hits(size);
      std::mutex mu;
      std::set<std::pair<unsigned long, unsigned long>> seen;
      j.thread_fn = [&](unsigned long s, unsigned long e, void*) {
        for (unsigned long i = s; i < e; ++i) hits[i - 11].fetch_add(1);
        std::lock_guard<std::mutex> g(mu);
        seen.emplace(s, e);
      };
      PadataInstance pinst(64, {true});
      std::vector<uint64_t> per_work;
      const PadataPlan p = padata_do_multithreaded(pinst, locks, j, &per_work);
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
      EXPECT_EQ(j.size, p.nworks >= 2 ? 0ul : size);  // the job state advances the job under ps.lock
      uint64_t sum = 0;
      for (uint64_t c : per_work) sum += c;
      EXPECT_EQ(sum, p.nr_chunks);
      EXPECT_EQ(seen.size(), p.nr_chunks);
      if (p.nworks >= 2) {
        const auto want = padata_chunks(11, size, p.chunk_size);
        const std::set<std::pair<unsigned long, unsigned long>> want_set(want.begin(), want.end());
        EXPECT_EQ(seen, want_set);
      }
      EXPECT_EQ(pinst.free_works(), 64);  // every work went back to the pool
    }
  }
}

TEST(Padata, JobStateNeedsTwoWorks) {
  LockDomain locks(LockConfig{}, false, false);
  padata_mt_job j;
  j.size = 10;
  PadataPlan p;
  p.nworks = 1;
  p.chunk_size = 10;
  EXPECT_THROW(PadataMtJobState(locks, j, p), std::invalid_argument);
}
