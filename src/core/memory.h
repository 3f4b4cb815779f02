// The process's heap: freed memory handed back to the system.
#pragma once

namespace quorum::core {

// Returns the heap's free pages to the system (glibc's malloc_trim; nothing elsewhere). The allocator keeps
// what a thread frees in that thread's arena for reuse, and a long campaign's threads (a draw per model, the
// reducer, the store) leave arenas whose free pages were never given back: the process's resident memory
// then rises over hours while the memory in use stays flat. A long-running loop calls this now and then.
void release_free_memory();

}  // namespace quorum::core
