#include "core/memory.h"

#include <cstdlib>  // defines __GLIBC__ on glibc, which the checks below need

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace quorum::core {

void map_large_blocks() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kLargeBlock));
#endif
}

void release_free_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace quorum::core
