// The process's heap: large blocks served from their own mappings, freed memory handed back to the system.
#pragma once

#include <cstddef>

namespace quorum::core {

// The size from which map_large_blocks() serves a block from a mapping of its own (1 MiB).
inline constexpr size_t kLargeBlock = size_t{1} << 20;
// The free memory at the heap's top that map_large_blocks() lets the heap keep between releases (32 MiB).
inline constexpr size_t kTrimAbove = size_t{32} << 20;

// Serves every block of kLargeBlock or more from its own mapping, unmapped when freed (glibc's mallopt
// M_MMAP_THRESHOLD; nothing elsewhere). glibc otherwise raises that threshold to the largest block freed so
// far (up to 32 MiB), so a long-running loop whose working sets are large short-lived tensors serves them
// from the heap, and the heap's resident high-water mark follows the largest working set seen, fragmented by
// the small blocks that outlive it. A long-running process calls this once, at its start.
void map_large_blocks();

// Returns the heap's free pages to the system (glibc's malloc_trim; nothing elsewhere): whole pages inside
// free chunks of every arena, which the allocator otherwise keeps for reuse. Pages of a fragmented heap that
// still hold a live allocation stay resident. A long-running loop calls this now and then.
void release_free_memory();

}  // namespace quorum::core
