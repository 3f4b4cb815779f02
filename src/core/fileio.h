// Whole-file reads and atomic writes (temporary file + rename: no half-written output).
#pragma once
#include <string>

namespace quorum::core {

std::string read_file(const std::string& path);  // UserError naming the path when unreadable
void write_file_atomic(const std::string& path, const std::string& content);

}  // namespace quorum::core
