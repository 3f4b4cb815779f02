// The name of a signal as findings show it: "SIGSEGV", or "signal N" for an uncommon one.
#pragma once
#include <string>

namespace quorum::core {

std::string signal_name(int sig);

}  // namespace quorum::core
