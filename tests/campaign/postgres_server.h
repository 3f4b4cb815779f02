// A real PostgreSQL server for a test: initdb and pg_ctl (Debian's, from /usr/lib/postgresql/*/bin)
// in a temporary directory, listening on a unix socket there only (no TCP), stopped by the
// destructor. As root the server runs as the `postgres` user (initdb refuses root).
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/fileio.h"

namespace quorum::testing {

class PostgresServer {
 public:
  // The bin directory of the newest installed server, or empty.
  static std::string bin_dir() {
    namespace fs = std::filesystem;
    std::vector<fs::path> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator("/usr/lib/postgresql", ec))
      if (fs::exists(e.path() / "bin" / "initdb") && fs::exists(e.path() / "bin" / "pg_ctl"))
        found.push_back(e.path() / "bin");
    if (found.empty()) return "";
    std::sort(found.begin(), found.end(), [](const fs::path& a, const fs::path& b) {
      return std::atoi(a.parent_path().filename().c_str()) < std::atoi(b.parent_path().filename().c_str());
    });
    return found.back().string();
  }

  // Starts a server; error() says why when it did not.
  PostgresServer() {
    namespace fs = std::filesystem;
    bin_ = bin_dir();
    if (bin_.empty()) {
      error_ = "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb): make deps installs postgresql";
      return;
    }
    dir_ = (fs::temp_directory_path() / ("quorum_pg_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    if (::geteuid() == 0) {
      if (std::system(("chown postgres: " + dir_).c_str()) != 0) {
        error_ = "cannot hand " + dir_ + " to the postgres user";
        return;
      }
      as_ = "runuser -u postgres -- ";
    }
    if (!sh(bin_ + "/initdb -D " + dir_ + "/data -U quorum -A trust --no-sync >" + dir_ + "/initdb.log 2>&1")) {
      error_ = "initdb failed: " + core::read_file(dir_ + "/initdb.log");
      return;
    }
    if (!sh(bin_ + "/pg_ctl -D " + dir_ + "/data -l " + dir_ + "/server.log -w -t 60 -o \"-k " + dir_ +
            " -c listen_addresses='' -c fsync=off -c max_connections=40\" start >/dev/null 2>&1")) {
      error_ = "pg_ctl start failed: " + core::read_file(dir_ + "/server.log");
      return;
    }
    started_ = true;
    if (!sh(bin_ + "/createdb -h " + dir_ + " -U quorum campaign >/dev/null 2>" + dir_ + "/createdb.log")) {
      error_ = "createdb failed: " + core::read_file(dir_ + "/createdb.log");
      return;
    }
    url_ = "postgresql:///campaign?host=" + dir_ + "&user=quorum";
  }
  ~PostgresServer() {
    if (started_) sh(bin_ + "/pg_ctl -D " + dir_ + "/data -m immediate -w stop >/dev/null 2>&1");
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  // A libpq URL of a database of its own (created on first use).
  std::string database(const std::string& name) {
    if (name != "campaign" && !sh(bin_ + "/createdb -h " + dir_ + " -U quorum " + name + " >/dev/null 2>&1")) return "";
    return "postgresql:///" + name + "?host=" + dir_ + "&user=quorum";
  }
  // Stops the server (immediate: open connections drop) and starts it again.
  bool restart() { return sh(bin_ + "/pg_ctl -D " + dir_ + "/data -m immediate -w -t 60 restart >/dev/null 2>&1"); }
  const std::string& url() const { return url_; }
  const std::string& dir() const { return dir_; }

 private:
  bool sh(const std::string& cmd) const { return std::system((as_ + cmd).c_str()) == 0; }

  std::string bin_, dir_, url_, error_, as_;
  bool started_ = false;
};

}  // namespace quorum::testing
