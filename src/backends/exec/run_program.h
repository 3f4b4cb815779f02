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

// A program started once and given one request line at a time (the exec backend's persistent
// mode): its stdin is a socket Quorum writes requests to, its stdout a pipe it answers on, its
// stderr the log file; in its own process group, killed with the worker (PR_SET_PDEATHSIG). A
// program that died or was killed at the time limit is started again by the next ask(). Its stderr
// goes to a log file removed from its directory at once (under $TMPDIR or /tmp), so nothing is left
// behind however the worker ends.
class PersistentProgram {
 public:
  PersistentProgram(std::vector<std::string> argv, std::vector<std::string> env);
  ~PersistentProgram();  // closes its stdin, then kills its process group
  PersistentProgram(const PersistentProgram&) = delete;
  PersistentProgram& operator=(const PersistentProgram&) = delete;

  struct Answer {
    bool answered = false;  // one line came back on stdout
    std::string line;       // that line, without its newline
    ProgramEnd end;         // otherwise: how the program ended (TimedOut: it was killed at the limit)
    std::string tail;       // the end of what the program wrote to stderr during this request
  };
  // Sends `request` and a newline, starting the program first if it is not running, and waits at
  // most `time_limit_s` seconds for one line on its stdout. Throws std::runtime_error when the
  // program cannot be started at all.
  Answer ask(const std::string& request, double time_limit_s);
  // How many times the program was started.
  int starts() const { return starts_; }
  // Kills the program's process group and reaps it (the next ask() starts it again).
  void stop();

 private:
  void start();
  std::string log_since(size_t from) const;
  std::vector<std::string> argv_, env_;
  int log_fd_ = -1;  // the (unlinked) log file, the program's stderr
  int pid_ = -1, in_fd_ = -1, out_fd_ = -1, starts_ = 0;
  std::string pending_;  // bytes read past the last answer line
};

// This process's environment with `overrides` ("KEY=VALUE" each) replacing or adding entries.
std::vector<std::string> environment_with(const std::vector<std::string>& overrides);

// The last lines (at most `max_bytes`) of a text file, trailing blank space removed; "" if unreadable.
std::string file_tail(const std::string& path, size_t max_bytes = 1500);

// Absolute path of `program`: as given when it names a path (contains '/'), else found on $PATH.
// "" when it is not an executable file.
std::string resolve_program(const std::string& program);

}  // namespace quorum::backends::exec
