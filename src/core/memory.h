// The process's heap: freed memory handed back to the system.
#pragma once

namespace quorum::core {

// Returns the heap's free pages to the system (glibc's malloc_trim; nothing elsewhere): whole pages inside
// free chunks of every arena, which the allocator otherwise keeps for reuse. Pages of a fragmented heap that
// still hold a live allocation stay resident. A long-running loop calls this now and then.
void release_free_memory();

}  // namespace quorum::core
