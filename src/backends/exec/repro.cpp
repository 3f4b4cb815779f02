// The exec backend's reproducer: the runner program run exactly as Quorum ran it (model.onnx and
// input_<i>.npy in a fresh directory, PROGRAM ARG... DIR), then check.py comparing its
// output_<j>.npy with the float64 expected values (docs/exec-backend.md has the protocol).
#include <filesystem>
#include <sstream>

#include "backends/exec/exec_config.h"
#include "backends/repro.h"
#include "core/error.h"
#include "core/npy.h"
#include "ir/onnx_io.h"

namespace quorum::backends {

namespace {

// A word for a POSIX shell, single-quoted.
std::string sh_word(const std::string& s) {
  std::string o = "'";
  for (char ch : s) o += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return o + "'";
}

}  // namespace

ReproProgram write_repro_exec(const ReproCase& c, const std::string& dir) {
  if (c.train)
    throw ReproUnsupported("the exec backend does not train; the finding is in stage " +
                           std::string(core::to_string(c.stage)));
  // The backend's options: "exec:OPT+OPT+PROGRAM+ARG...".
  std::vector<std::string> args;
  const auto colon = c.backend.find(':');
  if (colon != std::string::npos) {
    std::stringstream ss(c.backend.substr(colon + 1));
    for (std::string a; std::getline(ss, a, '+');) args.push_back(a);
  }
  exec::Config cfg;
  try {
    cfg = exec::parse(args);
  } catch (const core::UserError& e) {
    throw ReproUnsupported(std::string("the runner cannot be named again: ") + e.what());
  }
  if (cfg.argv.empty()) throw ReproUnsupported("the exec backend ran without a program");
  // Arguments naming files relative to where Quorum ran become absolute, so the script runs anywhere.
  for (auto& a : cfg.argv) {
    std::error_code ec;
    if (a.find('/') != std::string::npos && a[0] != '/' && std::filesystem::exists(a, ec))
      a = std::filesystem::absolute(a).string();
  }

  ReproProgram p;
  p.main = "run.sh";
  p.run = "sh run.sh";
  write_repro_file(p, dir, "model.onnx", ir::graph_to_onnx(c.model, exec::onnx_form(cfg, c.model)).bytes);
  for (size_t i = 0; i < c.model.inputs.size(); ++i) {
    const auto& in = c.model.inputs[i];
    const std::string file = "input_" + std::to_string(i) + ".npy";
    core::write_npy(dir + "/" + file, c.inputs.at(in.name).to(in.type.dtype));
    p.files.push_back(file);
  }
  size_t real = 0;
  const std::vector<std::string> outputs = exec::onnx_outputs(c.model, real);
  std::vector<std::pair<size_t, std::string>> compared;  // (output index, value)
  const ir::Node* blamed = c.blamed();
  for (size_t j = 0; j < outputs.size(); ++j) {
    const bool of_blamed =
        blamed && std::find(blamed->outputs.begin(), blamed->outputs.end(), outputs[j]) != blamed->outputs.end();
    if ((j < real || of_blamed) && c.expected.count(outputs[j])) compared.emplace_back(j, outputs[j]);
  }

  std::ostringstream py;
  py << "#!/usr/bin/python3\n# Compares the runner's output_<j>.npy in DIR with the float64 expected values.\n";
  py << "import os\nimport sys\n\nimport numpy as np\n\n" << py_check_function() << "\n\n";
  py << "HERE = os.path.dirname(os.path.abspath(__file__))\nDIR = sys.argv[1]\n";
  py << "ATOL, RTOL = " << py_literal(c.tol.atol) << ", " << py_literal(c.tol.rtol) << "\nbad = 0\n";
  for (const auto& [j, v] : compared) {
    const std::string file = "expected_" + std::to_string(j) + ".npy";
    core::write_npy(dir + "/" + file, c.expected.at(v));
    p.files.push_back(file);
    const std::string out = "output_" + std::to_string(j) + ".npy";
    py << "path = os.path.join(DIR, '" << out << "')\n";
    py << "if not os.path.exists(path):\n    print('" << out << " (value %r) missing' % " << quoted(v)
       << ")\n    bad += 1\n";
    py << "else:\n    bad += quorum_check(" << quoted(v) << ", np.load(path), np.load(os.path.join(HERE, '" << file
       << "')), ATOL, RTOL)\n";
  }
  py << "sys.exit(1 if bad else 0)\n";
  write_repro_file(p, dir, "check.py", py.str());

  const bool crash = c.crash();
  std::ostringstream sh;
  sh << "#!/bin/sh\n" << repro_header(c, "#", "sh run.sh  (the runner below, and Debian python3-numpy for check.py)");
  sh << "# The runner, as the exec backend ran it: PROGRAM ARG... DIR (DIR holds model.onnx and input_<i>.npy;\n"
     << "# the runner writes output_<j>.npy there). Time limit " << cfg.time_limit_s << " s.\n";
  sh << "HERE=$(cd \"$(dirname \"$0\")\" && pwd)\nDIR=$(mktemp -d)\ntrap 'rm -rf \"$DIR\"' EXIT\n";
  sh << "cp \"$HERE/model.onnx\" \"$HERE\"/input_*.npy \"$DIR\"/ 2>/dev/null\n";
  if (cfg.persistent) {
    // The persistent protocol: the directory as the one request line, the status as the answer's first word.
    sh << "printf '%s\\n' \"$DIR\" | timeout " << cfg.time_limit_s
       << " env QUORUM_THREADS=1 OMP_NUM_THREADS=1 QUORUM_EXEC_PROTOCOL=persistent";
    for (const auto& a : cfg.argv) sh << " " << sh_word(a);
    sh << " >\"$DIR/answer\" 2>\"$DIR/runner.log\"\nstatus=$?\nanswer=$(head -n 1 \"$DIR/answer\")\n"
       << "if [ $status -eq 0 ]; then status=${answer%% *}; [ -n \"$status\" ] || status=1; fi\n"
       << "[ -z \"$answer\" ] || echo \"answer: $answer\" >>\"$DIR/runner.log\"\n";
  } else {
    sh << "timeout " << cfg.time_limit_s << " env QUORUM_THREADS=1 OMP_NUM_THREADS=1 QUORUM_EXEC_PROTOCOL=per-model";
    for (const auto& a : cfg.argv) sh << " " << sh_word(a);
    sh << " \"$DIR\" >\"$DIR/runner.log\" 2>&1 </dev/null\nstatus=$?\n";
  }
  sh << "if [ $status -ne 0 ]; then\n  tail -c 1500 \"$DIR/runner.log\"\n  echo \"the runner exited with status "
        "$status\"\n  exit "
     << (crash ? 1 : 2) << "\nfi\n";
  sh << "/usr/bin/python3 \"$HERE/check.py\" \"$DIR\"\n";
  write_repro_file(p, dir, p.main, sh.str());
  return p;
}

}  // namespace quorum::backends
