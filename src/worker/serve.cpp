// Worker request loop and frame I/O.
#include "worker/serve.h"

#include <unistd.h>

#include <cerrno>
#include <new>
#include <stdexcept>

#include "worker/codec.h"
#include "worker/outcome.h"
#include "worker/protocol.h"

namespace quorum::worker {

namespace {

bool read_all(int fd, char* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::read(fd, p + got, n - got);
    if (r == 0) return false;
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    got += static_cast<size_t>(r);
  }
  return true;
}

void write_all(int fd, const char* p, size_t n) {
  size_t put = 0;
  while (put < n) {
    const ssize_t w = ::write(fd, p + put, n - put);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("worker pipe closed");
    }
    put += static_cast<size_t>(w);
  }
}

std::string reply(Status s, const std::string& msg = "") {
  Writer w;
  w.u8(static_cast<uint8_t>(s));
  w.str(msg);
  return w.bytes();
}

// A failed child process of the library (the exec backend's program) as the outcome the same
// failure of the worker would have: its signal and output tail travel after the message.
std::string reply(const backends::ChildProcessError& e) {
  using K = backends::ChildProcessError::Kind;
  Writer w;
  w.u8(static_cast<uint8_t>(e.kind == K::Signal ? Status::Crash
                            : e.kind == K::Timeout ? Status::Timeout
                                                   : Status::LibraryError));
  w.str(e.what());
  w.u32(e.kind == K::Signal ? static_cast<uint32_t>(e.code) : 0);
  w.str(e.output_tail);
  return w.bytes();
}

// What a failed call of a library (or of Quorum's code in the worker) becomes, as in serve()'s own
// replies: `compiling` maps an unclassified exception to a conversion failure, else a library error.
// std::bad_alloc is an out-of-memory outcome.
struct Failed {
  Status status;
  std::string message;
  uint32_t signal = 0;
  std::string tail;
};
// A training step's result as the protocol carries it (a Train reply, a Batch case).
void write_train_result(Writer& w, const backends::TrainResult& res) {
  w.f64(res.loss);
  w.tensor(res.loss_grad);
  w.values(res.values);
  w.values(res.grads);
  w.values(res.weights_after);
}

Failed failed(const std::exception_ptr& e, bool compiling) {
  using K = backends::ChildProcessError::Kind;
  try {
    std::rethrow_exception(e);
  } catch (const std::bad_alloc&) {
    return {Status::OutOfMemory, "std::bad_alloc", 0, ""};
  } catch (const backends::ChildProcessError& c) {
    return {c.kind == K::Signal ? Status::Crash : c.kind == K::Timeout ? Status::Timeout : Status::LibraryError,
            c.what(), c.kind == K::Signal ? static_cast<uint32_t>(c.code) : 0u, c.output_tail};
  } catch (const backends::QuorumError& x) {
    return {Status::QuorumError, x.what(), 0, ""};
  } catch (const backends::UnsupportedError& x) {
    return {Status::Unsupported, x.what(), 0, ""};
  } catch (const backends::ConversionError& x) {
    return {Status::ConversionFailure, x.what(), 0, ""};
  } catch (const std::exception& x) {
    return {compiling ? Status::ConversionFailure : Status::LibraryError, x.what(), 0, ""};
  }
}

void write_lowering(Writer& w, const std::map<std::string, std::vector<std::string>>& lowering) {
  w.u32(static_cast<uint32_t>(lowering.size()));
  for (const auto& [node, ops] : lowering) {
    w.str(node);
    w.u32(static_cast<uint32_t>(ops.size()));
    for (const auto& op : ops) w.str(op);
  }
}

// A Compile or Optimized request's compile: the session, or null with the refusal's reply in `out` (Quorum's own
// exporter, an unsupported form, anything else the library throws: a conversion failure). Out of memory goes to
// the request loop.
std::unique_ptr<backends::Session> compile_or_refuse(backends::Backend& backend, const ir::Graph& g,
                                                     const backends::CompileOptions& opt, std::string& out) {
  try {
    return backend.compile(g, opt);
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const backends::QuorumError& e) {
    out = reply(Status::QuorumError, e.what());
  } catch (const backends::UnsupportedError& e) {
    out = reply(Status::Unsupported, e.what());
  } catch (const std::exception& e) {
    out = reply(Status::ConversionFailure, e.what());
  }
  return nullptr;
}

// Kind::Batch: every case compiled (once, or again with its own weights) and run; one reply.
void serve_batch(backends::Backend& backend, Reader& r, Writer& ok, std::unique_ptr<backends::Session>& session) {
  const ir::Graph g = r.graph();
  backends::CompileOptions opt;
  opt.dtype = static_cast<core::DType>(r.u8());
  opt.threads = static_cast<int>(r.u32());
  const bool forward = r.u8() != 0;
  const bool train = r.u8() != 0;
  backends::TrainRequest t;
  t.loss = r.str();
  t.loss_attrs = r.attrs();
  t.learning_rate = r.f64();
  const uint32_t count = r.u32();
  ok.u32(count);
  bool compiled = false;
  for (uint32_t i = 0; i < count; ++i) {
    const backends::ValueMap weights = r.values();
    t.inputs = r.values();
    if (train) t.target = r.tensor();
    uint8_t stage = 0;
    Writer item;
    backends::ValueMap values;  // the forward pass's, kept when the training step fails after it
    try {
      if (!compiled || !weights.empty()) {
        session.reset();
        ir::Graph gi = g;
        for (const auto& [name, w] : weights) gi.initializers[name] = w;
        session = backend.compile(gi, opt);
        compiled = weights.empty();
      }
      item.u8(static_cast<uint8_t>(Status::Ok));
      stage = 1;
      item.u8(forward ? 1 : 0);
      if (forward) {
        values = session->forward(t.inputs, true);
        item.values(values);
      }
      stage = 2;
      item.u8(train ? 1 : 0);
      if (train) {
        write_train_result(item, session->train_step(t));
      }
    } catch (...) {
      const Failed f = failed(std::current_exception(), stage == 0);
      if (stage == 0) session.reset(), compiled = false;
      item = Writer();
      item.u8(static_cast<uint8_t>(f.status));
      item.u8(stage);
      item.str(f.message);
      item.u32(f.signal);
      item.str(f.tail);
      item.u8(forward && stage == 2 ? 1 : 0);
      if (forward && stage == 2) item.values(values);
    }
    ok.raw(item.bytes().data(), item.bytes().size());
  }
}

}  // namespace

bool read_frame(int fd, std::string& payload) {
  uint32_t len;
  if (!read_all(fd, reinterpret_cast<char*>(&len), 4)) return false;
  if (len > kMaxFrame) throw std::runtime_error("frame too large");
  payload.resize(len);
  return read_all(fd, payload.data(), len);
}

void write_frame(int fd, const std::string& payload) {
  const uint32_t len = static_cast<uint32_t>(payload.size());
  std::string buf(reinterpret_cast<const char*>(&len), 4);
  buf += payload;
  write_all(fd, buf.data(), buf.size());
}

int serve(backends::Backend& backend, int in_fd, int out_fd) {
  std::unique_ptr<backends::Session> session;
  std::string req;
  while (read_frame(in_fd, req)) {
    Writer ok;
    ok.u8(static_cast<uint8_t>(Status::Ok));
    std::string out;
    try {
      Reader r(req);
      const auto kind = static_cast<Kind>(r.u8());
      switch (kind) {
        case Kind::Hello:
          ok.str(backend.name());
          ok.str(backend.version());
          ok.u8(backend.trains() ? 1 : 0);
          ok.u8(backend.reads_exchange_form() ? 1 : 0);
          ok.u8(backend.optimizes() ? 1 : 0);
          out = ok.bytes();
          break;
        case Kind::Supports: {
          ir::Graph g = r.graph();
          const bool training = r.u8() != 0;
          const std::vector<backends::Support> answers = backend.supports_nodes(g, training);
          ok.u32(static_cast<uint32_t>(g.nodes.size()));
          for (size_t i = 0; i < g.nodes.size(); ++i) {
            ok.str(g.nodes[i].name);
            ok.u8(answers[i].ok ? 1 : 0);
            ok.str(answers[i].reason);
          }
          out = ok.bytes();
          break;
        }
        case Kind::Compile: {
          ir::Graph g = r.graph();
          backends::CompileOptions opt;
          opt.dtype = static_cast<core::DType>(r.u8());
          opt.threads = static_cast<int>(r.u32());
          session.reset();
          session = compile_or_refuse(backend, g, opt, out);
          if (session) out = ok.bytes();
          break;
        }
        case Kind::Forward: {
          if (!session) {
            out = reply(Status::ProtocolError, "forward before compile");
            break;
          }
          const backends::ValueMap in = r.values();
          const bool keep = r.u8() != 0;
          ok.values(session->forward(in, keep));
          out = ok.bytes();
          break;
        }
        case Kind::Train: {
          if (!session) {
            out = reply(Status::ProtocolError, "train before compile");
            break;
          }
          backends::TrainRequest t;
          t.inputs = r.values();
          t.target = r.tensor();
          t.loss = r.str();
          t.loss_attrs = r.attrs();
          t.learning_rate = r.f64();
          write_train_result(ok, session->train_step(t));
          out = ok.bytes();
          break;
        }
        case Kind::Steps: {
          if (!session) {
            out = reply(Status::ProtocolError, "steps before compile");
            break;
          }
          backends::OptimizerSpec spec;
          spec.name = r.str();
          spec.lr = r.f64();
          spec.momentum = r.f64();
          spec.beta1 = r.f64();
          spec.beta2 = r.f64();
          spec.eps = r.f64();
          backends::TrainRequest t;
          t.loss = r.str();
          t.loss_attrs = r.attrs();
          const bool detail = r.u8() != 0;
          const uint32_t count = r.u32();
          ok.u32(count);
          for (uint32_t i = 0; i < count; ++i) {
            t.inputs = r.values();
            t.target = r.tensor();
            const backends::StepResult s = session->optimizer_step(t, spec);
            ok.f64(s.loss);
            if (detail) {
              ok.values(s.grads);
              ok.values(session->weights());
            }
          }
          out = ok.bytes();
          break;
        }
        case Kind::Weights: {
          if (!session) {
            out = reply(Status::ProtocolError, "weights before compile");
            break;
          }
          if (r.u8() != 0) session->set_weights(r.values());
          ok.values(session->weights());
          out = ok.bytes();
          break;
        }
        case Kind::Lowering: {
          write_lowering(ok, session ? session->lowering() : std::map<std::string, std::vector<std::string>>{});
          out = ok.bytes();
          break;
        }
        case Kind::Optimized: {
          ir::Graph g = r.graph();
          backends::CompileOptions opt;
          opt.dtype = static_cast<core::DType>(r.u8());
          opt.threads = static_cast<int>(r.u32());
          opt.optimized = true;
          const backends::ValueMap in = r.values();
          const std::unique_ptr<backends::Session> s = compile_or_refuse(backend, g, opt, out);
          if (!s) break;
          ok.values(s->forward(in, false));
          write_lowering(ok, s->lowering());
          out = ok.bytes();
          break;
        }
        case Kind::Batch:
          serve_batch(backend, r, ok, session);
          out = ok.bytes();
          break;
        default: out = reply(Status::ProtocolError, "unknown request kind"); break;
      }
    } catch (const std::bad_alloc&) {
      out = reply(Status::OutOfMemory, "std::bad_alloc");
    } catch (const backends::ChildProcessError& e) {
      out = reply(e);
    } catch (const backends::QuorumError& e) {
      out = reply(Status::QuorumError, e.what());
    } catch (const backends::UnsupportedError& e) {
      // A library that only builds the model when it runs (exec) abstains here.
      out = reply(Status::Unsupported, e.what());
    } catch (const backends::ConversionError& e) {
      // A library that only builds the model when it runs (exec) refuses it here.
      out = reply(Status::ConversionFailure, e.what());
    } catch (const std::exception& e) {
      out = reply(Status::LibraryError, e.what());
    }
    write_frame(out_fd, out);
  }
  return 0;
}

}  // namespace quorum::worker
