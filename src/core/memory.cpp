#include "core/memory.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace quorum::core {

void release_free_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace quorum::core
