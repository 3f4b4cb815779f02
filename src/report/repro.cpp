// Dispatching a bundle to its library's reproducer writer.
#include "report/repro.h"

#include <filesystem>

#include "core/error.h"
#include "core/fileio.h"

// The writers: one QUORUM_REPRO_WRITER(name) line per src/backends/<name>/repro.cpp (generated).
namespace quorum::backends {
#define QUORUM_REPRO_WRITER(name) ReproProgram write_repro_##name(const ReproCase&, const std::string&);
#include "repro_writers.inc"
#undef QUORUM_REPRO_WRITER
}  // namespace quorum::backends

namespace quorum::report {

namespace {

namespace fs = std::filesystem;
using backends::ReproCase;

struct WriterEntry {
  const char* name;
  backends::ReproWriter write;
};
#define QUORUM_REPRO_WRITER(name) {#name, &backends::write_repro_##name},
const WriterEntry kWriters[] = {
#include "repro_writers.inc"
    {nullptr, nullptr}};
#undef QUORUM_REPRO_WRITER

backends::ReproWriter find_writer(const std::string& backend) {
  const std::string base = backend.substr(0, backend.find(':'));
  for (const auto& w : kWriters)
    if (w.name && base == w.name) return w.write;
  return nullptr;
}

}  // namespace

std::vector<std::string> repro_backends() {
  std::vector<std::string> v;
  for (const auto& w : kWriters)
    if (w.name) v.push_back(w.name);
  return v;
}

std::string repro_main(const std::string& repro_dir) {
  for (const char* m : {"repro.py", "repro.cpp", "run.sh"})
    if (fs::exists(fs::path(repro_dir) / m)) return m;
  return "";
}

Repro write_repro(const std::string& bundle_dir, const std::string& out_dir) {
  Repro r;
  r.dir = out_dir.empty() ? (fs::path(bundle_dir) / "repro").string() : out_dir;
  std::error_code ec;
  if (out_dir.empty()) fs::remove_all(r.dir, ec);  // the bundle's own folder holds one reproducer, the latest
  core::make_directories(r.dir);
  const ReproCase c = load_repro_case(bundle_dir);
  const backends::ReproWriter w = find_writer(c.backend);
  if (!w) {
    r.reason = "no reproducer writer for backend '" + c.backend + "'";
  } else {
    try {
      r.program = w(c, r.dir);
      r.written = true;
      fs::remove(r.dir + "/README.txt", ec);
    } catch (const backends::ReproUnsupported& e) {
      r.reason = e.what();
    }
  }
  if (!r.written)
    core::write_file_atomic(r.dir + "/README.txt", "No standalone reproducer: " + r.reason +
                                                       "\nReplay the finding with Quorum: " + c.replay + "\n");
  return r;
}

}  // namespace quorum::report
