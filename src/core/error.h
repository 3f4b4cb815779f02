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
