// Backend specs and the set of workers they start.
#include "worker/worker_set.h"

#include <sstream>

#include "core/error.h"

namespace quorum::worker {

std::string BackendSpec::str() const {
  std::string s = name;
  for (size_t i = 0; i < options.size(); ++i) s += (i ? "+" : ":") + options[i];
  return s;
}

std::vector<BackendSpec> parse_backends(const std::string& list) {
  std::vector<BackendSpec> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    BackendSpec s;
    const auto colon = item.find(':');
    s.name = item.substr(0, colon);
    if (colon != std::string::npos) {
      std::stringstream os(item.substr(colon + 1));
      std::string opt;
      while (std::getline(os, opt, '+'))
        if (!opt.empty()) s.options.push_back(opt);
    }
    worker_path(s.name);  // UserError for an unknown name
    try {
      check_options(s.name, s.options);  // and for options its worker refuses
    } catch (const core::UserError& e) {
      throw core::UserError("--backends " + s.str() + ": " + e.what());
    }
    out.push_back(std::move(s));
  }
  if (out.empty()) throw core::UserError("--backends: no backend named");
  return out;
}

WorkerSet::WorkerSet(const std::vector<BackendSpec>& specs, const Limits& limits) {
  for (const auto& s : specs) workers_.push_back(std::make_unique<Worker>(s.name, s.options, limits));
}

}  // namespace quorum::worker
