// Outcomes of a call into a library: an enum, not strings (like benchdnn's res_t).
#pragma once
#include <cstdint>
#include <string>

namespace quorum::worker {

enum class Status : uint8_t {
  Ok = 0,
  Unsupported,        // the backend says it cannot express the model (with a reason)
  ConversionFailure,  // the library refused to build the model
  LibraryError,       // the library threw while running
  OutOfMemory,        // allocation failed under the address-space limit (or the OOM killer struck)
  Crash,              // the worker died on a signal or exited unexpectedly
  Timeout,            // the call ran past its time limit; the worker was killed
  ProtocolError,      // the worker answered something unreadable (a Quorum bug)
  QuorumError,        // Quorum's own code inside the worker failed (the ONNX exporter): not the library's
};

const char* to_string(Status s);

struct Outcome {
  Status status = Status::Ok;
  std::string message;      // library message, or "SIGSEGV", "timed out after 5 s", ...
  int signal = 0;           // for Crash
  std::string stderr_tail;  // the last lines the worker wrote to stderr, for Crash/Timeout/OOM
  bool ok() const { return status == Status::Ok; }
  std::string str() const;  // "crash: SIGSEGV (stderr: ...)"
};

}  // namespace quorum::worker
