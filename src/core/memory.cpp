#include "core/memory.h"

#include <cstdlib>  // defines __GLIBC__ on glibc, which the check below needs

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
