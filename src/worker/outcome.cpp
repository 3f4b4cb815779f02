// Outcome names.
#include "worker/outcome.h"

namespace quorum::worker {

const char* to_string(Status s) {
  switch (s) {
    case Status::Ok: return "ok";
    case Status::Unsupported: return "unsupported";
    case Status::ConversionFailure: return "conversion failure";
    case Status::LibraryError: return "library error";
    case Status::OutOfMemory: return "out of memory";
    case Status::Crash: return "crash";
    case Status::Timeout: return "timeout";
    case Status::ProtocolError: return "protocol error";
    case Status::QuorumError: return "Quorum error";
  }
  return "?";
}

std::string Outcome::str() const {
  std::string s = to_string(status);
  // A structured refusal's message already starts with its status ("unsupported: Erf (ONNX opset 13)").
  if (status == Status::Unsupported && message.rfind(s + ": ", 0) == 0) s.clear();
  if (!message.empty()) s += (s.empty() ? "" : ": ") + message;
  if (!stderr_tail.empty()) {
    std::string tail = stderr_tail;
    for (auto& c : tail)
      if (c == '\n') c = '|';
    s += " (stderr: " + tail + ")";
  }
  return s;
}

}  // namespace quorum::worker
