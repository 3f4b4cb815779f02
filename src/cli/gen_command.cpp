// quorum gen (being written).
#include "cli/commands.h"
#include "core/error.h"

namespace quorum::cli {

int cmd_gen(const Options&) { throw core::UserError("gen: not built yet"); }

}  // namespace quorum::cli
