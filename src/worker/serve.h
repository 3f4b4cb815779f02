// The worker side: answers requests for one backend until its input closes.
#pragma once
#include "backends/backend.h"

namespace quorum::worker {

// Runs the request loop. Library exceptions become LibraryError/ConversionFailure replies,
// std::bad_alloc becomes OutOfMemory, and a backends::ChildProcessError the Crash/Timeout/
// LibraryError of that child; the worker's own signals and hangs are the supervisor's to classify.
int serve(backends::Backend& backend, int in_fd, int out_fd);

}  // namespace quorum::worker
