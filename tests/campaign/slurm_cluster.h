// A single-node Slurm for a test: slurmctld and slurmd (Debian's slurm-wlm) with a configuration in
// a temporary directory, on loopback ports of their own, without munge (auth/none, cred/none),
// stopped by the destructor. SLURM_CONF is set for this process, so sbatch run from it (and
// the jobs it starts) use this cluster.
#pragma once
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "core/fileio.h"

namespace quorum::testing {

class SlurmCluster {
 public:
  // Why there can be none here, or empty.
  static std::string unavailable() {
    for (const char* b : {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/bin/sbatch", "/usr/bin/sinfo"})
      if (!std::filesystem::exists(b)) return std::string("no ") + b + " (make deps installs slurm-wlm)";
    if (::geteuid() != 0) return "the test's Slurm daemons run as root";
    return "";
  }

  SlurmCluster() {
    namespace fs = std::filesystem;
    dir_ = (fs::temp_directory_path() / ("quorum_slurm_" + std::to_string(::getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_ + "/state");
    fs::create_directories(dir_ + "/spool");
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    std::string h = host;
    h = h.substr(0, h.find('.'));
    const int port = 20000 + 2 * static_cast<int>(::getpid() % 6000);  // below the ephemeral ports
    std::ofstream c(dir_ + "/slurm.conf");
    c << "ClusterName=quorumtest\nSlurmctldHost=" << h << "(127.0.0.1)\nSlurmctldPort=" << port
      << "\nSlurmdPort=" << port + 1 << "\nAuthType=auth/none\nCredType=cred/none\nStateSaveLocation=" << dir_
      << "/state\nSlurmdSpoolDir=" << dir_ << "/spool\nSlurmctldPidFile=" << dir_
      << "/slurmctld.pid\nSlurmdPidFile=" << dir_ << "/slurmd.pid\nSlurmctldLogFile=" << dir_
      << "/slurmctld.log\nSlurmdLogFile=" << dir_ << "/slurmd.log\n"
      << "ProctrackType=proctrack/pgid\nTaskPlugin=task/none\nSelectType=select/cons_tres\n"
      << "SelectTypeParameters=CR_Core\nSlurmUser=root\nSlurmdUser=root\nReturnToService=2\nMpiDefault=none\n"
      << "JobCompType=jobcomp/none\nAccountingStorageType=accounting_storage/none\n"
      << "NodeName=quorumnode NodeAddr=127.0.0.1 CPUs=2 RealMemory=1000 State=UNKNOWN\n"
      << "PartitionName=test Nodes=quorumnode Default=YES MaxTime=INFINITE State=UP\n";
    c.close();
    ::setenv("SLURM_CONF", (dir_ + "/slurm.conf").c_str(), 1);
    if (std::system(("/usr/sbin/slurmctld -i >" + dir_ + "/start.log 2>&1").c_str()) != 0 ||
        std::system(("/usr/sbin/slurmd -N quorumnode >>" + dir_ + "/start.log 2>&1").c_str()) != 0) {
      error_ = "the daemons did not start: " + core::read_file(dir_ + "/start.log");
      return;
    }
    // Up when the node is idle (bounded: 60 s).
    for (int i = 0; i < 300; ++i) {
      const std::string state = dir_ + "/sinfo.out";
      std::system(("/usr/bin/sinfo -h -o %T >" + state + " 2>/dev/null").c_str());
      if (core::read_file(state).rfind("idle", 0) == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    error_ = "the node did not become idle: " + core::read_file(dir_ + "/slurmctld.log");
  }
  ~SlurmCluster() {
    for (const char* p : {"/slurmd.pid", "/slurmctld.pid"}) {
      const std::string f = dir_ + p;
      if (!std::filesystem::exists(f)) continue;
      const pid_t pid = static_cast<pid_t>(std::atol(core::read_file(f).c_str()));
      if (pid <= 1) continue;
      ::kill(pid, SIGTERM);
      for (int i = 0; i < 100 && ::kill(pid, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::unsetenv("SLURM_CONF");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_, error_;
};

}  // namespace quorum::testing
