// Starting, timing and killing the exec backend's program.
#include "backends/exec/run_program.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace quorum::backends::exec {

namespace {

using Clock = std::chrono::steady_clock;

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

// The child's side of the fork: stdin, stdout and stderr from the given descriptors (a program run
// per model: /dev/null and the log twice; the persistent program: the request socket, the answer
// pipe and the log). Only async-signal-safe calls until execv.
[[noreturn]] void become_program(char* const* argv, char* const* envp, pid_t parent, int in_fd, int out_fd,
                                 int err_fd) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the worker died before the line above
  ::dup2(in_fd, 0);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  // The worker's protocol pipes must not leak into the program (nor outlive the worker in it).
  if (::close_range(3, ~0U, 0) != 0)
    for (int fd = 3; fd < 4096; ++fd) ::close(fd);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execve(argv[0], argv, envp);
  const char* why = ::strerror(errno);
  const char* what = "quorum exec backend: cannot execute ";
  [[maybe_unused]] ssize_t w = ::write(2, what, std::strlen(what));
  w = ::write(2, argv[0], std::strlen(argv[0]));
  w = ::write(2, ": ", 2);
  w = ::write(2, why, std::strlen(why));
  w = ::write(2, "\n", 1);
  ::_exit(127);
}

int wait_blocking(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

}  // namespace

ProgramEnd run_program(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       const std::string& log_path, double time_limit_s) {
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) throw std::runtime_error("exec: cannot create " + log_path + ": " + std::strerror(errno));
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::vector<std::string> args = argv, vars = env;
  std::vector<char*> cargs, cenv;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  for (auto& v : vars) cenv.push_back(v.data());
  cenv.push_back(nullptr);

  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(time_limit_s));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    throw std::runtime_error(std::string("exec: fork: ") + std::strerror(err));
  }
  if (pid == 0) become_program(cargs.data(), cenv.data(), parent, null_fd, log_fd, log_fd);
  ::setpgid(pid, pid);  // also done by the child; whichever runs first (EACCES after its exec)
  ::close(log_fd);
  if (null_fd >= 0) ::close(null_fd);

  ProgramEnd end;
  int status = 0;
  long step_ns = 1'000'000;  // polls from 1 ms up to 20 ms apart: programs take ~0.1 s to start
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) throw std::runtime_error(std::string("exec: waitpid: ") + std::strerror(errno));
    if (Clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);
      wait_blocking(pid);
      end.how = ProgramEnd::How::TimedOut;
      return end;
    }
    const timespec ts{0, step_ns};
    ::nanosleep(&ts, nullptr);
    step_ns = std::min(step_ns * 2, 20'000'000L);
  }
  ::kill(-pid, SIGKILL);  // whatever the program left running in its group
  if (WIFSIGNALED(status)) {
    end.how = ProgramEnd::How::Signaled;
    end.code = WTERMSIG(status);
  } else {
    end.how = ProgramEnd::How::Exited;
    end.code = WEXITSTATUS(status);
  }
  return end;
}

PersistentProgram::PersistentProgram(std::vector<std::string> argv, std::vector<std::string> env)
    : argv_(std::move(argv)), env_(std::move(env)) {}

PersistentProgram::~PersistentProgram() {
  stop();
  if (log_fd_ >= 0) ::close(log_fd_);
}

std::string PersistentProgram::log_since(size_t from) const {
  struct stat st {};
  if (log_fd_ < 0 || ::fstat(log_fd_, &st) != 0 || static_cast<size_t>(st.st_size) <= from) return "";
  const size_t size = static_cast<size_t>(st.st_size), want = std::min<size_t>(size - from, 1500);
  std::string text(want, '\0');
  const ssize_t n = ::pread(log_fd_, text.data(), want, static_cast<off_t>(size - want));
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  if (size - from > want)
    if (const auto nl = text.find('\n'); nl != std::string::npos) text = text.substr(nl + 1);  // whole lines
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  return text;
}

void PersistentProgram::start() {
  if (log_fd_ < 0) {
    const char* tmp = std::getenv("TMPDIR");
    std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/quorum-exec-log-XXXXXX";
    log_fd_ = ::mkostemp(path.data(), O_CLOEXEC | O_APPEND);  // appended to at any size (truncated per request)
    if (log_fd_ < 0)
      throw std::runtime_error("exec: cannot create a log file from " + path + ": " + std::strerror(errno));
    ::unlink(path.c_str());  // gone from the directory now; the descriptors keep it
  }
  const int log_fd = ::dup(log_fd_);  // the program's stderr
  if (log_fd < 0) throw std::runtime_error(std::string("exec: dup: ") + std::strerror(errno));
  ::fcntl(log_fd, F_SETFD, FD_CLOEXEC);
  int sock[2], pipe_fds[2];
  // stdin is a socket so that writing to a program that died is an error (MSG_NOSIGNAL), not SIGPIPE.
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock) != 0) {
    ::close(log_fd);
    throw std::runtime_error(std::string("exec: socketpair: ") + std::strerror(errno));
  }
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    ::close(log_fd);
    ::close(sock[0]);
    ::close(sock[1]);
    throw std::runtime_error(std::string("exec: pipe: ") + std::strerror(errno));
  }
  std::vector<std::string> args = argv_, vars = env_;
  std::vector<char*> cargs, cenv;
  for (auto& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  for (auto& v : vars) cenv.push_back(v.data());
  cenv.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    for (int fd : {log_fd, sock[0], sock[1], pipe_fds[0], pipe_fds[1]}) ::close(fd);
    throw std::runtime_error(std::string("exec: fork: ") + std::strerror(err));
  }
  if (pid == 0) become_program(cargs.data(), cenv.data(), parent, sock[1], pipe_fds[1], log_fd);
  ::setpgid(pid, pid);
  ::close(log_fd);
  ::close(sock[1]);
  ::close(pipe_fds[1]);
  pid_ = pid;
  in_fd_ = sock[0];
  out_fd_ = pipe_fds[0];
  pending_.clear();
  ++starts_;
}

void PersistentProgram::stop() {
  if (in_fd_ >= 0) ::close(in_fd_);
  if (out_fd_ >= 0) ::close(out_fd_);
  in_fd_ = out_fd_ = -1;
  if (pid_ > 0) {
    ::kill(-pid_, SIGKILL);
    wait_blocking(pid_);
  }
  pid_ = -1;
}

PersistentProgram::Answer PersistentProgram::ask(const std::string& request, double time_limit_s) {
  if (pid_ <= 0) start();
  Answer a;
  // The log holds this request's output only (the program's writes append after the truncation).
  const size_t log_from = 0;
  if (::ftruncate(log_fd_, 0) != 0) {
    // an unwritable log only loses the program's output tail
  }
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(time_limit_s));
  // How the program ended, once it has closed its stdout or may have (the write failed).
  auto ended = [&]() {
    int status = 0;
    pid_t r = 0;
    // It closed its end: it is exiting. Give it until the deadline to be reaped.
    while ((r = ::waitpid(pid_, &status, WNOHANG)) == 0 && Clock::now() < deadline) {
      const timespec ts{0, 2'000'000};
      ::nanosleep(&ts, nullptr);
    }
    if (r == pid_) {
      a.end.how = WIFSIGNALED(status) ? ProgramEnd::How::Signaled : ProgramEnd::How::Exited;
      a.end.code = WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status);
      ::kill(-pid_, SIGKILL);  // whatever it left running in its group
      pid_ = -1;
    } else {
      a.end.how = ProgramEnd::How::TimedOut;
    }
    stop();
    a.tail = log_since(log_from);
    return a;
  };
  const std::string line = request + "\n";
  for (size_t sent = 0; sent < line.size();) {
    const ssize_t w = ::send(in_fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return ended();
    sent += static_cast<size_t>(w);
  }
  for (;;) {
    if (const auto nl = pending_.find('\n'); nl != std::string::npos) {
      a.answered = true;
      a.line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      a.tail = log_since(log_from);
      return a;
    }
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) {
      stop();
      a.end.how = ProgramEnd::How::TimedOut;
      a.tail = log_since(log_from);
      return a;
    }
    pollfd p{out_fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::ceil(left * 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;  // the deadline check above ends the wait
    char buf[4096];
    const ssize_t n = ::read(out_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ended();  // stdout closed: the program is gone
    pending_.append(buf, static_cast<size_t>(n));
  }
}

std::vector<std::string> environment_with(const std::vector<std::string>& overrides) {
  std::vector<std::string> env = overrides;
  auto key = [](const std::string& kv) { return kv.substr(0, kv.find('=')); };
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    if (std::none_of(overrides.begin(), overrides.end(), [&](const std::string& o) { return key(o) == key(kv); }))
      env.push_back(kv);
  }
  return env;
}

std::string file_tail(const std::string& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (all.size() > max_bytes) {
    all = all.substr(all.size() - max_bytes);
    if (const auto nl = all.find('\n'); nl != std::string::npos) all = all.substr(nl + 1);  // whole lines
  }
  while (!all.empty() && std::isspace(static_cast<unsigned char>(all.back()))) all.pop_back();
  return all;
}

std::string resolve_program(const std::string& program) {
  if (program.find('/') != std::string::npos) return is_executable_file(program) ? program : "";
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (is_executable_file(candidate)) return candidate;
  }
  return "";
}

}  // namespace quorum::backends::exec
