// Large blocks served from mappings of their own, the heap's free pages handed back to the system (core/memory.h).
#include "core/memory.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace quorum::core {
namespace {

// This process's resident anonymous memory, in kB (Linux); -1 when it cannot be read. Unused where the test
// is skipped (ASan's allocator).
[[maybe_unused]] long rss_anon_kb() {
  std::ifstream in("/proc/self/status");
  std::string key;
  long kb = -1;
  while (in >> key) {
    if (key == "RssAnon:") {
      in >> kb;
      return kb;
    }
    in.ignore(1 << 12, '\n');
  }
  return -1;
}

// 64 MB in 32 kB blocks (below the allocator's mmap threshold, so inside the heap), every block written,
// then all freed but the last (which keeps the heap's top from being trimmed on free): the freed pages stay
// resident until release_free_memory() returns them.
TEST(Memory, ReleaseReturnsTheHeapsFreedPagesToTheSystem) {
#if !defined(__GLIBC__) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "glibc's own allocator only";
#else
  if (rss_anon_kb() < 0) GTEST_SKIP() << "no /proc/self/status";
  constexpr size_t kBlock = 32 << 10, kBlocks = 2048;
  std::vector<char*> blocks;
  for (size_t i = 0; i < kBlocks; ++i) {
    blocks.push_back(static_cast<char*>(std::malloc(kBlock)));
    std::memset(blocks.back(), 1, kBlock);
  }
  for (size_t i = 0; i + 1 < kBlocks; ++i) std::free(blocks[i]);
  const long held = rss_anon_kb();
  release_free_memory();
  const long after = rss_anon_kb();
  std::free(blocks.back());
  EXPECT_LT(after, held - 32 * 1024) << "resident anonymous kB before the release " << held << ", after " << after;
#endif
}

// After map_large_blocks(), 64 MB in 2 MiB blocks, every block written and followed by a small block that
// stays live, are unmapped when freed. Without it glibc, having seen a 4 MiB block freed, serves the 2 MiB
// blocks from the heap, where the small live blocks keep their freed pages from being returned.
TEST(Memory, LargeBlocksAreUnmappedWhenFreed) {
#if !defined(__GLIBC__) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "glibc's own allocator only";
#else
  if (rss_anon_kb() < 0) GTEST_SKIP() << "no /proc/self/status";
  map_large_blocks();
  // Through volatile pointers, so that the compiler cannot drop a block nothing reads.
  void* (*volatile allocate)(size_t) = std::malloc;
  void (*volatile release)(void*) = std::free;
  char* first = static_cast<char*>(allocate(4 * kLargeBlock));  // raises glibc's dynamic threshold
  std::memset(first, 1, 4 * kLargeBlock);
  release(first);
  constexpr size_t kBlocks = 32, kSmall = 64 << 10;  // kSmall: larger than any free chunk left at start-up
  std::vector<char*> large, small;
  for (size_t i = 0; i < kBlocks; ++i) {
    large.push_back(static_cast<char*>(allocate(2 * kLargeBlock)));
    std::memset(large.back(), 1, 2 * kLargeBlock);
    small.push_back(static_cast<char*>(allocate(kSmall)));  // from the heap's top, after the large block
    std::memset(small.back(), 1, kSmall);
  }
  const long held = rss_anon_kb();
  for (char* p : large) release(p);
  const long after = rss_anon_kb();
  for (char* p : small) release(p);
  EXPECT_LT(after, held - 48 * 1024) << "resident anonymous kB before the frees " << held << ", after " << after;
#endif
}

}  // namespace
}  // namespace quorum::core
