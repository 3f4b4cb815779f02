// A failing-write shim for tests (LD_PRELOAD): the disk fills up, or processes and pipes run out,
// exactly where a test says, so that what Quorum does then can be checked on a real run.
//
//   QUORUM_SHIM_WRITE_MATCH=TEXT   writes to regular files whose path contains TEXT (default: any
//   QUORUM_SHIM_WRITE_AFTER=N      regular file) fail with ENOSPC once N bytes went to such files
//   QUORUM_SHIM_FORK_FAIL=1        fork() fails with EAGAIN, pipe()/pipe2() with EMFILE
//
// Writes to pipes, terminals and sockets always go through (a worker's frames, the log).
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>

namespace {

std::atomic<long long> written{0};

template <class Fn>
Fn next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

// True when this write of `n` bytes to `fd` is to fail: a regular file matching the pattern, past
// the budget.
bool fails(int fd, size_t n) {
  const char* after = getenv("QUORUM_SHIM_WRITE_AFTER");
  if (!after) return false;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (const char* match = getenv("QUORUM_SHIM_WRITE_MATCH")) {
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    const ssize_t len = readlink(link, path, sizeof path - 1);
    if (len < 0) return false;
    path[len] = '\0';
    if (!strstr(path, match)) return false;
  }
  const long long total = written.fetch_add(static_cast<long long>(n)) + static_cast<long long>(n);
  return total > atoll(after);
}

bool fork_fails() {
  const char* f = getenv("QUORUM_SHIM_FORK_FAIL");
  return f && *f == '1';
}

}  // namespace

extern "C" {

ssize_t write(int fd, const void* buf, size_t n) {
  if (fails(fd, n)) {
    errno = ENOSPC;
    return -1;
  }
  return next<ssize_t (*)(int, const void*, size_t)>("write")(fd, buf, n);
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  if (fails(fd, n)) {
    errno = ENOSPC;
    return -1;
  }
  return next<ssize_t (*)(int, const void*, size_t, off_t)>("pwrite")(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t off) {
  if (fails(fd, n)) {
    errno = ENOSPC;
    return -1;
  }
  return next<ssize_t (*)(int, const void*, size_t, off64_t)>("pwrite64")(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec* iov, int count) {
  size_t n = 0;
  for (int i = 0; i < count; ++i) n += iov[i].iov_len;
  if (fails(fd, n)) {
    errno = ENOSPC;
    return -1;
  }
  return next<ssize_t (*)(int, const struct iovec*, int)>("writev")(fd, iov, count);
}

pid_t fork() noexcept {
  if (fork_fails()) {
    errno = EAGAIN;
    return -1;
  }
  return next<pid_t (*)()>("fork")();
}

int pipe(int fds[2]) noexcept {
  if (fork_fails()) {
    errno = EMFILE;
    return -1;
  }
  return next<int (*)(int*)>("pipe")(fds);
}

int pipe2(int fds[2], int flags) noexcept {
  if (fork_fails()) {
    errno = EMFILE;
    return -1;
  }
  return next<int (*)(int*, int)>("pipe2")(fds, flags);
}

}  // extern "C"
