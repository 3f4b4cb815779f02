// Whole-file reads and atomic writes (temporary file + rename: no half-written output).
#pragma once
#include <string>

namespace quorum::core {

std::string read_file(const std::string& path);  // UserError naming the path when unreadable
// UserError when the file cannot be created where asked (no such folder, no permission); SystemError
// when the disk is full or the file system refuses the bytes.
void write_file_atomic(const std::string& path, const std::string& content);
// create_directories: SystemError naming `dir` when the file system cannot take it, else UserError.
void make_directories(const std::string& dir);

}  // namespace quorum::core
