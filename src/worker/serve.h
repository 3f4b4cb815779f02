// The worker side: answers requests for one backend until its input closes.
#pragma once
#include "backends/backend.h"

namespace quorum::worker {

// Runs the request loop. Library exceptions become LibraryError/ConversionFailure replies and
// std::bad_alloc becomes OutOfMemory; signals and hangs are the supervisor's to classify.
int serve(backends::Backend& backend, int in_fd, int out_fd);

}  // namespace quorum::worker
