#include "core/memory.h"

#include <cstdlib>  // defines __GLIBC__ on glibc, which the checks below need

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace quorum::core {

void map_large_blocks() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kLargeBlock));
  // A fixed threshold also fixes the heap's trim threshold, at 128 KiB: every free that leaves more than that
  // at the heap's top would return it, and the next allocation fault it in again. The top keeps kTrimAbove;
  // release_free_memory() returns it now and then.
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(kTrimAbove));
#endif
}

void release_free_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace quorum::core
