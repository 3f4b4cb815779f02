// quorum transfer: every known-issue ledger case on every library and with its operator's siblings.
#include <filesystem>
#include <iostream>
#include <set>

#include "campaign/bundle.h"
#include "store/store.h"
#include "campaign/transfer.h"
#include "cli/commands.h"
#include "core/error.h"

namespace quorum::cli {

int cmd_transfer(const Options& o) {
  const std::string dir = o.ledger.empty() ? oracle::default_ledger_dir() : o.ledger;
  const oracle::Ledger ledger = oracle::load_ledgers(dir);
  campaign::TransferOptions opt;
  if (o.backends.empty()) {
    // Every library built here; the reference, the planted faults and exec (which needs a program)
    // have no ledger of their own to transfer to.
    std::string list;
    for (const auto& b : worker::available_backends())
      if (b != "ref" && b != "faulty" && b != "exec") list += (list.empty() ? "" : ",") + b;
    if (list.empty()) throw core::UserError("transfer: no library backend is built here; name one with --backends");
    opt.backends = campaign::parse_backends(list);
  } else {
    opt.backends = campaign::parse_backends(o.backends);
  }
  opt.filter = o.filter;
  opt.siblings = !o.no_siblings;
  opt.limits = limits_of(o);
  opt.seed = o.seed == 0 ? 1 : o.seed;
  const std::string out = o.out.empty() ? "transfer" : o.out;
  std::filesystem::create_directories(out);
  const auto store = store::open_store("", out);
  std::string backends_list;
  for (const auto& b : opt.backends) backends_list += (backends_list.empty() ? "" : ",") + b.str();
  store->check_settings({{"command", "transfer"},
                         {"backends", backends_list},
                         {"seed", std::to_string(opt.seed)},
                         {"siblings", opt.siblings ? "1" : "0"}});
  std::cout << "transfer: ledger " << dir << ", backends " << backends_list << ", seed " << opt.seed
            << " (weights a sibling needs), findings into " << store->where() << "\n";
  int64_t index = 0, run = 0, skipped = 0, with_new = 0;
  std::set<std::string> fresh;
  campaign::WorkerSet workers(opt.backends, opt.limits);
  campaign::transfer_known(ledger, opt, workers, [&](const campaign::TransferVariant& v) {
    const int64_t i = index++;
    if (!v.skipped.empty()) {
      ++skipped;
      if (o.verbose) std::cout << "  skipped " << v.entry->id << " with " << v.op << ": " << v.skipped << "\n";
      return;
    }
    ++run;
    if (!v.fresh.empty()) ++with_new;
    for (const auto& f : v.fresh)
      if (fresh.insert(f.signature()).second) {
        std::cout << "  NEW  " << f.signature() << "  <- " << v.origin() << "\n";
      }
    if (store->model_done(i)) return;
    const campaign::BundleContext ctx{v.model, v.evaluation, v.setup, opt.seed, i, o.command_line, {}, v.origin(), {}};
    store->record(i, v.evaluation.findings,
                  [&](const oracle::Finding& f) { return campaign::write_bundle(out, f, ctx); });
  });
  std::cout << "transfer: " << run << " variants run (" << skipped << " not valid for the sibling's shape rule), "
            << with_new << " showed findings no ledger entry explains: " << fresh.size() << " new signatures\n"
            << "store: " << store->where() << "; reduce them with: quorum reduce " << out
            << "; report: quorum report " << out << "\n";
  return 0;
}

}  // namespace quorum::cli
