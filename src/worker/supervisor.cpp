// Worker processes: spawn, frame I/O with deadlines, limits, classification.
#include "worker/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "core/signals.h"
#include "worker/codec.h"
#include "worker/protocol.h"

namespace quorum::worker {

namespace {

using Clock = std::chrono::steady_clock;

std::string exe_dir() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

double remaining(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

// Waits until fd is ready for `events` or the deadline passes. Returns false on timeout.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const double left = remaining(deadline);
    if (left <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min(left * 1000.0 + 1, 60000.0)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return true;  // let the read/write report the error
  }
}

enum class Io { Ok, Closed, Timeout };

Io write_all(int fd, const char* p, size_t n, Clock::time_point deadline) {
  size_t put = 0;
  while (put < n) {
    if (!wait_fd(fd, POLLOUT, deadline)) return Io::Timeout;
    const ssize_t w = ::write(fd, p + put, n - put);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Io::Closed;
    }
    put += static_cast<size_t>(w);
  }
  return Io::Ok;
}

Io read_all(int fd, char* p, size_t n, Clock::time_point deadline) {
  size_t got = 0;
  while (got < n) {
    if (!wait_fd(fd, POLLIN, deadline)) return Io::Timeout;
    const ssize_t r = ::read(fd, p + got, n - got);
    if (r == 0) return Io::Closed;
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return Io::Closed;
    }
    got += static_cast<size_t>(r);
  }
  return Io::Ok;
}

}  // namespace

const std::vector<std::string>& available_backends() {
  static const std::vector<std::string> names = {
#include "backend_table.inc"
  };
  return names;
}

std::string worker_path(const std::string& backend) {
  const auto& names = available_backends();
  if (std::find(names.begin(), names.end(), backend) == names.end()) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw core::UserError("unknown backend '" + backend + "' (built: " + list + ")");
  }
  const char* dir = std::getenv("QUORUM_WORKER_DIR");
  return (dir ? std::string(dir) : exe_dir()) + "/quorum-worker-" + backend;
}

std::string refused_options(const Outcome& started) {
  if (started.ok() || started.message != "worker exited with code 2") return "";
  const std::string prefix = "quorum-worker: ";
  const size_t at = started.stderr_tail.rfind(prefix);
  std::string why = at == std::string::npos ? started.stderr_tail : started.stderr_tail.substr(at + prefix.size());
  why.resize(std::min(why.size(), why.find('\n')));
  return why.empty() ? "options refused" : why;
}

void check_options(const std::string& backend, const std::vector<std::string>& options) {
  if (options.empty()) return;
  Worker w(backend, options, Limits{});
  BackendInfo info;
  if (const std::string why = refused_options(w.hello(info)); !why.empty()) throw core::UserError(why);
}

Worker::Worker(std::string backend, std::vector<std::string> args, Limits limits)
    : backend_(std::move(backend)), args_(std::move(args)), limits_(limits) {
  worker_path(backend_);  // reject unknown names now, not at the first call
  static const bool ignore_sigpipe = [] {
    ::signal(SIGPIPE, SIG_IGN);  // a dead worker must not kill us through its pipe
    return true;
  }();
  (void)ignore_sigpipe;
  char tmpl[] = "/tmp/quorum-worker-stderr-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  if (fd < 0) throw core::UserError(std::string("cannot create a worker log file: ") + std::strerror(errno));
  ::close(fd);
  stderr_path_ = tmpl;
}

Worker::~Worker() {
  stop();
  if (!stderr_path_.empty()) std::filesystem::remove(stderr_path_);
}

void Worker::start() {
  const std::string path = worker_path(backend_);
  int to_child[2], from_child[2];
  if (::pipe2(to_child, O_CLOEXEC) != 0)
    throw core::SystemError("cannot start the " + backend_ + " worker: pipe: " + std::strerror(errno));
  if (::pipe2(from_child, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(to_child[0]);
    ::close(to_child[1]);
    throw core::SystemError("cannot start the " + backend_ + " worker: pipe: " + std::strerror(err));
  }
  const int err_fd = ::open(stderr_path_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  std::vector<std::string> argv_s{path};
  argv_s.insert(argv_s.end(), args_.begin(), args_.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  const rlim_t as_limit = limits_.address_space_mb ? limits_.address_space_mb << 20 : RLIM_INFINITY;
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1], err_fd})
      if (fd >= 0) ::close(fd);
    throw core::SystemError("cannot start the " + backend_ + " worker: fork: " + std::strerror(err));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::dup2(to_child[0], 0);
    ::dup2(from_child[1], 1);
    if (err_fd >= 0) ::dup2(err_fd, 2);
    rlimit core{0, 0};
    ::setrlimit(RLIMIT_CORE, &core);
#if !defined(__SANITIZE_ADDRESS__)
    // (AddressSanitizer reserves terabytes of shadow memory: an address-space limit breaks it.)
    rlimit as{as_limit, as_limit};
    ::setrlimit(RLIMIT_AS, &as);
#else
    (void)as_limit;
#endif
    ::execv(path.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(to_child[0]);
  ::close(from_child[1]);
  if (err_fd >= 0) ::close(err_fd);
  pid_ = pid;
  to_fd_ = to_child[1];
  from_fd_ = from_child[0];
  ++starts_;
  compiles_ = 0;
}

void Worker::stop() {
  if (pid_ <= 0) return;
  ::close(to_fd_);
  ::close(from_fd_);
  // Closing stdin ends a healthy worker; kill it anyway so a hung one cannot linger.
  ::kill(pid_, SIGKILL);
  int status;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  to_fd_ = from_fd_ = -1;
}

std::string Worker::stderr_tail() const {
  std::ifstream in(stderr_path_, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  constexpr size_t kTail = 1500;
  if (all.size() > kTail) all = all.substr(all.size() - kTail);
  while (!all.empty() && (all.back() == '\n' || all.back() == ' ')) all.pop_back();
  return all;
}

Outcome Worker::death(int wait_status, bool timed_out) {
  Outcome o;
  o.stderr_tail = stderr_tail();
  if (timed_out) {
    o.status = Status::Timeout;
    o.message = "no answer within " + std::to_string(static_cast<int>(limits_.timeout_s)) + " s; worker killed";
    return o;
  }
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    o.signal = sig;
    o.message = core::signal_name(sig);
    const bool alloc_failure = o.stderr_tail.find("bad_alloc") != std::string::npos ||
                               o.stderr_tail.find("out of memory") != std::string::npos ||
                               o.stderr_tail.find("Cannot allocate memory") != std::string::npos;
    // SIGKILL we did not send is the kernel's OOM killer; an abort after a failed allocation
    // is an out-of-memory death too.
    o.status = (sig == SIGKILL || (sig == SIGABRT && alloc_failure)) ? Status::OutOfMemory : Status::Crash;
    return o;
  }
  o.status = Status::Crash;
  o.message = "worker exited with code " + std::to_string(WEXITSTATUS(wait_status));
  return o;
}

Outcome Worker::call(const std::string& request, std::string& reply, double timeout_scale) {
  if (pid_ <= 0) start();
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(limits_.timeout_s * timeout_scale));
  const uint32_t len = static_cast<uint32_t>(request.size());
  Io io = write_all(to_fd_, reinterpret_cast<const char*>(&len), 4, deadline);
  if (io == Io::Ok) io = write_all(to_fd_, request.data(), request.size(), deadline);
  uint32_t rlen = 0;
  if (io == Io::Ok) io = read_all(from_fd_, reinterpret_cast<char*>(&rlen), 4, deadline);
  if (io == Io::Ok && rlen > kMaxFrame) {  // not a reply this protocol sends: allocate nothing for it
    stop();
    return Outcome{Status::ProtocolError, "reply frame of " + std::to_string(rlen) + " bytes", 0, ""};
  }
  if (io == Io::Ok) {
    reply.resize(rlen);
    io = read_all(from_fd_, reply.data(), rlen, deadline);
  }
  if (io == Io::Ok) return {};
  // The worker died or hung: kill, reap, classify. The next call starts a fresh one.
  if (io == Io::Timeout) ::kill(pid_, SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  ::close(to_fd_);
  ::close(from_fd_);
  pid_ = -1;
  return death(status, io == Io::Timeout);
}

namespace {
// Parses a reply's status; for a non-Ok status, fills the message.
Outcome reply_status(Reader& r) {
  Outcome o;
  const uint8_t s = r.u8();
  if (s > static_cast<uint8_t>(Status::QuorumError)) {
    o.status = Status::ProtocolError;
    o.message = "bad status byte";
    return o;
  }
  o.status = static_cast<Status>(s);
  if (!o.ok()) o.message = r.str();
  if (!o.ok() && !r.done()) {  // a library child process's failure: its signal and output tail
    o.signal = static_cast<int>(r.u32());
    o.stderr_tail = r.str();
  }
  return o;
}

template <class Fn>
Outcome decode(const std::string& reply, Fn&& fn) {
  try {
    Reader r(reply);
    Outcome o = reply_status(r);
    if (o.ok()) fn(r);
    return o;
  } catch (const std::exception& e) {
    return Outcome{Status::ProtocolError, e.what(), 0, ""};
  }
}
}  // namespace

Outcome Worker::hello(BackendInfo& info) {
  Writer w;
  w.u8(static_cast<uint8_t>(Kind::Hello));
  std::string reply;
  Outcome o = call(w.bytes(), reply);
  if (!o.ok()) return o;
  return decode(reply, [&](Reader& r) {
    info.name = r.str();
    info.version = r.str();
    info.trains = r.u8() != 0;
    info.reads_exchange_form = r.u8() != 0;
    info.optimizes = r.u8() != 0;
  });
}

const BackendInfo* Worker::info() {
  if (!info_) {
    BackendInfo i;
    if (!hello(i).ok()) return nullptr;
    info_ = std::move(i);
  }
  return &*info_;
}

Outcome Worker::supports(const ir::Graph& g, bool training, std::vector<NodeSupport>& out) {
  Writer w;
  w.u8(static_cast<uint8_t>(Kind::Supports));
  w.graph(g);
  w.u8(training ? 1 : 0);
  std::string reply;
  Outcome o = call(w.bytes(), reply);
  if (!o.ok()) return o;
  return decode(reply, [&](Reader& r) {
    out.clear();
    for (uint32_t i = 0, n = r.u32(); i < n; ++i) {
      NodeSupport s;
      s.node = r.str();
      s.ok = r.u8() != 0;
      s.reason = r.str();
      out.push_back(std::move(s));
    }
  });
}

namespace {
// Resident memory of a process in MiB (0 when it cannot be read).
// Read with open/read, not a stream: it is asked before every compile, and a stream's construction
// (its locale) cost more than the read itself.
uint64_t resident_mib(pid_t pid) {
  char path[48];
  std::snprintf(path, sizeof path, "/proc/%d/statm", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  unsigned long long size = 0, resident = 0;
  if (std::sscanf(buf, "%llu %llu", &size, &resident) != 2) return 0;
  return static_cast<uint64_t>(resident) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE)) >> 20;
}
}  // namespace

void Worker::maybe_recycle() {
  if (pid_ <= 0) return;
  const bool by_count = limits_.recycle_models > 0 && compiles_ >= limits_.recycle_models;
  const bool by_memory = limits_.recycle_rss_mb > 0 && resident_mib(pid_) > limits_.recycle_rss_mb;
  if (!by_count && !by_memory) return;
  stop();  // the next call starts a fresh process
  ++recycles_;
}

Outcome Worker::compile(const ir::Graph& g, const backends::CompileOptions& opt) {
  maybe_recycle();
  Writer w;
  w.u8(static_cast<uint8_t>(Kind::Compile));
  w.graph(g);
  w.u8(static_cast<uint8_t>(opt.dtype));
  w.u32(static_cast<uint32_t>(opt.threads));
  std::string reply;
  Outcome o = call(w.bytes(), reply);
  ++compiles_;
  if (!o.ok()) return o;
  return decode(reply, [](Reader&) {});
}

Outcome Worker::forward(const backends::ValueMap& inputs, bool keep, backends::ValueMap& out) {
  Writer w;
  w.u8(static_cast<uint8_t>(Kind::Forward));
  w.values(inputs);
  w.u8(keep ? 1 : 0);
  std::string reply;
  Outcome o = call(w.bytes(), reply);
  if (!o.ok()) return o;
  return decode(reply, [&](Reader& r) { out = r.values(); });
}

namespace {
std::map<std::string, std::vector<std::string>> read_lowering(Reader& r) {
  std::map<std::string, std::vector<std::string>> out;
  for (uint32_t i = 0, n = r.u32(); i < n; ++i) {
    std::vector<std::string>& ops = out[r.str()];
    for (uint32_t k = 0, m = r.u32(); k < m; ++k) ops.push_back(r.str());
  }
  return out;
}
}  // namespace

Outcome Worker::lowering(std::map<std::string, std::vector<std::string>>& out) {
  Writer w;
  w.u8(static_cast<uint8_t>(Kind::Lowering));
  std::string reply;
  Outcome o = call(w.bytes(), reply);
  if (!o.ok()) return o;
  return decode(reply, [&](Reader& r) { out = read_lowering(r); });
}

Outcome Worker::optimized(const ir::Graph& g, backends::CompileOptions opt, const backends::ValueMap& inputs,
                          OptimizedResult& out) {
  maybe_recycle();
  Writer w;
  w.u8(static_cast<uint8_t>(Kind::Optimized));
  w.graph(g);
  w.u8(static_cast<uint8_t>(opt.dtype));
  w.u32(static_cast<uint32_t>(opt.threads));
  w.values(inputs);
  std::string reply;
  Outcome o = call(w.bytes(), reply);
  ++compiles_;
  if (!o.ok()) return o;
  return decode(reply, [&](Reader& r) {
    out.values = r.values();
    out.lowering = read_lowering(r);
  });
}

Outcome Worker::train(const backends::TrainRequest& req, backends::TrainResult& out) {
  Writer w;
  w.u8(static_cast<uint8_t>(Kind::Train));
  w.values(req.inputs);
  w.tensor(req.target);
  w.str(req.loss);
  w.attrs(req.loss_attrs);
  w.f64(req.learning_rate);
  std::string reply;
  Outcome o = call(w.bytes(), reply);
  if (!o.ok()) return o;
  return decode(reply, [&](Reader& r) {
    out.loss = r.f64();
    out.loss_grad = r.tensor();
    out.values = r.values();
    out.grads = r.values();
    out.weights_after = r.values();
  });
}

Outcome Worker::steps(const StepsRequest& req, std::vector<StepOutput>& out) {
  Writer w;
  w.u8(static_cast<uint8_t>(Kind::Steps));
  w.str(req.optimizer.name);
  w.f64(req.optimizer.lr);
  w.f64(req.optimizer.momentum);
  w.f64(req.optimizer.beta1);
  w.f64(req.optimizer.beta2);
  w.f64(req.optimizer.eps);
  w.str(req.loss);
  w.attrs(req.loss_attrs);
  w.u8(req.detail ? 1 : 0);
  w.u32(static_cast<uint32_t>(req.steps.size()));
  for (const auto& [inputs, target] : req.steps) {
    w.values(inputs);
    w.tensor(target);
  }
  std::string reply;
  Outcome o = call(w.bytes(), reply, static_cast<double>(std::max<size_t>(1, req.steps.size())));
  if (!o.ok()) return o;
  return decode(reply, [&](Reader& r) {
    out.clear();
    const uint32_t n = r.u32();
    if (n != req.steps.size()) throw MalformedMessage("steps reply: wrong number of steps");
    for (uint32_t i = 0; i < n; ++i) {
      StepOutput s;
      s.loss = r.f64();
      if (req.detail) {
        s.grads = r.values();
        s.weights = r.values();
      }
      out.push_back(std::move(s));
    }
  });
}

Outcome Worker::weights(const backends::ValueMap* set, backends::ValueMap& out) {
  Writer w;
  w.u8(static_cast<uint8_t>(Kind::Weights));
  w.u8(set ? 1 : 0);
  if (set) w.values(*set);
  std::string reply;
  Outcome o = call(w.bytes(), reply);
  if (!o.ok()) return o;
  return decode(reply, [&](Reader& r) { out = r.values(); });
}

Outcome Worker::batch(const ir::Graph& g, const BatchRequest& req, std::vector<BatchResult>& out) {
  maybe_recycle();
  Writer w;
  w.u8(static_cast<uint8_t>(Kind::Batch));
  w.graph(g);
  w.u8(static_cast<uint8_t>(req.options.dtype));
  w.u32(static_cast<uint32_t>(req.options.threads));
  w.u8(req.forward ? 1 : 0);
  w.u8(req.train ? 1 : 0);
  w.str(req.loss);
  w.attrs(req.loss_attrs);
  w.f64(req.learning_rate);
  w.u32(static_cast<uint32_t>(req.cases.size()));
  for (const auto& c : req.cases) {
    w.values(c.weights);
    w.values(c.inputs);
    if (req.train) w.tensor(c.target);
  }
  std::string reply;
  // Compile and run per case, within the time limit each: the call's limit scales with the count.
  Outcome o = call(w.bytes(), reply, static_cast<double>(std::max<size_t>(1, req.cases.size())));
  ++compiles_;
  if (!o.ok()) return o;
  return decode(reply, [&](Reader& r) {
    out.clear();
    const uint32_t n = r.u32();
    if (n != req.cases.size()) throw MalformedMessage("batch reply: wrong number of cases");
    for (uint32_t i = 0; i < n; ++i) {
      BatchResult b;
      const uint8_t s = r.u8();
      if (s > static_cast<uint8_t>(Status::QuorumError)) throw MalformedMessage("batch reply: bad status byte");
      b.outcome.status = static_cast<Status>(s);
      if (b.outcome.ok()) {
        b.ran_forward = r.u8() != 0;
        if (b.ran_forward) b.values = r.values();
        b.trained = r.u8() != 0;
        if (b.trained) {
          b.train.loss = r.f64();
          b.train.loss_grad = r.tensor();
          b.train.values = r.values();
          b.train.grads = r.values();
          b.train.weights_after = r.values();
        }
      } else {
        b.failed_at = r.u8();
        b.outcome.message = r.str();
        b.outcome.signal = static_cast<int>(r.u32());
        b.outcome.stderr_tail = r.str();
        b.ran_forward = r.u8() != 0;  // a training step that failed after its forward pass
        if (b.ran_forward) b.values = r.values();
      }
      out.push_back(std::move(b));
    }
  });
}

}  // namespace quorum::worker
