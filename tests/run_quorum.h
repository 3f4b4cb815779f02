// Running the quorum command from a test: exit code, stdout and stderr, with a scratch directory
// per test program.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/fileio.h"

namespace quorum::testing {

struct Result {
  int code;
  std::string out, err;
};

// A directory of this test process (`tag` keeps programs apart), created on first use.
inline std::filesystem::path scratch(const std::string& tag) {
  const auto d = std::filesystem::temp_directory_path() / ("quorum_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

// Runs `quorum ARGS` (no shell quoting: arguments must not contain spaces) with stdin closed;
// `env`, when given, is VAR=VALUE settings for that process (as env(1) takes them).
inline Result run_quorum(const std::string& args, const std::string& tag, const std::string& env = "") {
  const auto d = scratch(tag);
  const std::string cmd = (env.empty() ? "" : "env " + env + " ") + std::string(QUORUM_BINARY) + " " + args + " >" +
                          (d / "out").string() + " 2>" + (d / "err").string() + " </dev/null";
  const int status = std::system(cmd.c_str());
  return {WEXITSTATUS(status), core::read_file((d / "out").string()), core::read_file((d / "err").string())};
}

}  // namespace quorum::testing
