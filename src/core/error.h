// Error types shared by every module.
// A UserError is the user's mistake (bad file, bad flag): one line, exit code 2.
// An OpError is a shape/attribute rule that a node violates; callers wrap it with the node's name.
#pragma once
#include <stdexcept>
#include <string>

namespace quorum::core {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& msg) : std::runtime_error(msg) {}
};

class OpError : public std::runtime_error {
 public:
  explicit OpError(const std::string& msg) : std::runtime_error(msg) {}
};

// The machine refused what Quorum needs to go on: a file could not be written (the disk is full, a
// quota, a read-only file system), a worker process or its pipe could not be created. What a run
// finds could no longer be recorded or found, so a campaign stops at once, keeping what it recorded
// before; main prints the message ("no space left on device while writing PATH") and exits 1. Not a
// UserError: nothing catches it to carry on.
class SystemError : public std::runtime_error {
 public:
  explicit SystemError(const std::string& msg) : std::runtime_error(msg) {}
};
// The SystemError for errno `err` while writing `path`.
[[noreturn]] void write_failed(const std::string& path, int err);

// Internal invariant: a bug in Quorum itself, never the user's fault.
[[noreturn]] void internal_error(const std::string& msg);

#define QUORUM_CHECK(cond, msg)                                            \
  do {                                                                     \
    if (!(cond)) ::quorum::core::internal_error(std::string(__FILE__) + ":" + \
                                                std::to_string(__LINE__) + ": " + (msg)); \
  } while (0)

// Throws OpError(reason) unless cond holds. Used by shape rules ("requires").
inline void require(bool cond, const std::string& reason) {
  if (!cond) throw OpError(reason);
}

}  // namespace quorum::core
