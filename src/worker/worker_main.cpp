// quorum-worker-<backend>: one backend behind the worker protocol. The protocol uses private
// copies of stdin/stdout; fd 1 is pointed at stderr so a library that prints cannot corrupt it.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <iostream>

#include "core/error.h"
#include "worker/serve.h"

int main(int argc, char** argv) {
  // A library crash must end the worker on its signal so the supervisor can classify it;
  // sanitizer runtimes would otherwise catch it and exit with a plain code.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) ::signal(sig, SIG_DFL);
  const int proto_in = ::dup(0);
  const int proto_out = ::dup(1);
  ::dup2(2, 1);
  const int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, 0);
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    auto backend = quorum::backends::create_backend(args);
    return quorum::worker::serve(*backend, proto_in, proto_out);
  } catch (const quorum::core::UserError& e) {
    std::cerr << "quorum-worker: " << e.what() << std::endl;
    return 2;
  }
}
