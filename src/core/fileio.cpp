// File helpers.
#include "core/fileio.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace quorum::core {

namespace {
// The file system cannot take what is written, wherever it goes: not the user's choice of path.
bool storage_failure(int err) { return err == ENOSPC || err == EDQUOT || err == EROFS || err == EIO || err == EFBIG; }
}  // namespace

void write_failed(const std::string& path, int err) {
  if (err == ENOSPC || err == EDQUOT) throw SystemError("no space left on device while writing " + path);
  throw SystemError("cannot write " + path + ": " + std::strerror(err));
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file_atomic(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    if (storage_failure(err)) write_failed(path, err);
    throw UserError(path + ": cannot write: " + std::strerror(err));
  }
  // Every byte through write(2) and the close checked: a full disk shows in one of them.
  const char* p = content.data();
  size_t left = content.size();
  int err = 0;
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    std::remove(tmp.c_str());
    write_failed(path, err);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    if (storage_failure(err)) write_failed(path, err);
    throw UserError(path + ": cannot rename into place: " + std::strerror(err));
  }
}

void make_directories(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (!ec) return;
  if (storage_failure(ec.value())) write_failed(dir, ec.value());
  throw UserError(dir + ": cannot create the folder: " + ec.message());
}

}  // namespace quorum::core
