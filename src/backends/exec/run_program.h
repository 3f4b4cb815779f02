// Running an external program for the exec backend: fork + execv (argv only, never a shell), in its
// own process group, killed with the worker (PR_SET_PDEATHSIG), stdin from /dev/null, stdout and
// stderr into a log file, and a time limit after which the whole process group is killed.
#pragma once
#include <string>
#include <vector>

namespace quorum::backends::exec {

struct ProgramEnd {
  enum class How { Exited, Signaled, TimedOut };
  How how = How::Exited;
  int code = 0;  // the exit status (Exited) or the signal number (Signaled)
};

// Runs argv[0] with argv and the environment `env` ("KEY=VALUE" each) and waits at most
// `time_limit_s` seconds. Every process left in the program's process group afterwards (a hung
// child, a forgotten grandchild) is killed. Throws std::runtime_error when the program cannot be
// started at all (fork or the log file fails).
ProgramEnd run_program(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       const std::string& log_path, double time_limit_s);

// This process's environment with `overrides` ("KEY=VALUE" each) replacing or adding entries.
std::vector<std::string> environment_with(const std::vector<std::string>& overrides);

// The last lines (at most `max_bytes`) of a text file, trailing blank space removed; "" if unreadable.
std::string file_tail(const std::string& path, size_t max_bytes = 1500);

// Absolute path of `program`: as given when it names a path (contains '/'), else found on $PATH.
// "" when it is not an executable file.
std::string resolve_program(const std::string& program);

}  // namespace quorum::backends::exec
