// The PostgreSQL findings store against a real server this test starts (initdb + pg_ctl in a
// temporary directory, a unix socket only): the SQLite store's semantics operation by operation;
// one bundle when two shards find the same new signature at once; four shard processes of the
// quorum binary writing at once, one killed with SIGKILL and resumed, equal to one SQLite run of
// the same seed and models; the Slurm example script run as two array tasks.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <thread>

#include "campaign/postgres_server.h"
#include "campaign/slurm_cluster.h"
#include "store/store.h"
#include "core/error.h"
#include "run_quorum.h"

namespace quorum::store {
namespace {

namespace fs = std::filesystem;
using testing::PostgresServer;

#define START_SERVER(server)                                             \
  PostgresServer server;                                                 \
  if (PostgresServer::bin_dir().empty()) GTEST_SKIP() << server.error(); \
  ASSERT_TRUE(server.ok()) << server.error()

oracle::Finding finding(const std::string& op, const std::string& node,
                        core::FindingKind kind = core::FindingKind::NaN) {
  oracle::Finding f;
  f.kind = kind;
  f.stage = core::Stage::Forward;
  f.backend = "faulty:x";
  f.op = op;
  f.node = node;
  f.detail = "d " + node;
  f.distance = kind == core::FindingKind::NaN ? std::numeric_limits<double>::infinity() : 0.25;
  return f;
}

// The same operations on a store; what it holds afterwards, timestamps aside.
std::string exercise(Store& s) {
  s.check_settings({{"seed", "7"}, {"generator", "unit"}});
  s.check_settings({{"seed", "7"}});
  auto bundle = [&](const oracle::Finding& f) { return "/b/" + f.op + "-" + f.node; };
  std::string out;
  out += std::to_string(s.record(3, {finding("relu", "r1"), finding("exp", "e1"), finding("relu", "r2")}, bundle));
  out += std::to_string(s.record(1, {finding("exp", "e2", core::FindingKind::Inconsistency)}, bundle));
  out += std::to_string(s.record(2, {}, nullptr));
  out += std::to_string(s.record(5, {finding("exp", "e3")}, bundle)) + "\n";
  // Batched models whose findings are stored: hits added (twice in one model counts twice), models
  // done, an unknown signature skipped.
  const std::string relu = finding("relu", "").signature();
  s.record_known({{6, {relu, relu}}, {7, {}}, {8, {"nan|FC|nowhere|none", relu}}});
  s.record_known({});
  for (const auto& f : s.findings()) {
    if (f.signature == relu) {
      EXPECT_EQ(f.hits, 5);
    }
  }
  s.set_root_cause(finding("exp", "").signature(), "rc-exp", "/b/exp-e1/reduced");
  // A finding whose reduced case a ledger entry knows takes that entry (the campaign passes one where the reduced
  // case decides: Ledger::match_reduced); a later one replaces it, none keeps it.
  s.set_root_cause(finding("relu", "").signature(), "rc-relu", "/b/relu-r1/reduced", "another");
  s.set_root_cause(finding("relu", "").signature(), "rc-relu", "/b/relu-r1/reduced", "entry-relu");
  s.set_root_cause(finding("relu", "").signature(), "rc-relu", "/b/relu-r1/reduced");
  out += std::to_string(s.models_done()) + " " + std::to_string(s.model_done(2)) + std::to_string(s.model_done(4));
  out += " " + s.setting("seed").value_or("-") + s.setting("none").value_or("-") + "\n";
  for (const auto& m : s.models()) out += std::to_string(m.index) + ":" + std::to_string(m.findings) + " ";
  out += "\n";
  for (const auto& f : s.findings())
    out += f.signature + " " + core::to_string(f.kind) + " " + f.node + " " + f.detail + " " + f.bundle + " " +
           std::to_string(f.distance) + " " + std::to_string(f.hits) + " " + std::to_string(f.first_model) + " " +
           f.root_cause + " " + f.reduced + " " + f.known + " " + (f.first_seen.empty() ? "no time" : "") + "\n";
  for (const auto& r : s.root_causes())
    out += r.signature + " " + std::to_string(r.findings) + " " + std::to_string(r.hits) + " " + r.reduced + "\n";
  int64_t per_second = 0;
  for (const auto& [t, n] : s.models_per_second()) per_second += n;
  out += std::to_string(per_second) + "\n";
  s.record_refusal("exec:a", "Erf (ONNX opset 13)", 7, 1, 0, {"erf"});
  s.record_refusal("exec:a", "Erf (ONNX opset 13)", 4, 0, 3, {"gelu", "erf"});
  s.record_refusal("exec:b", "LSTM (ONNX opset 13)", 9, 1, 2, {"lstm"});
  for (const auto& r : s.refusals())
    out += r.backend + " " + r.refusal + " " + std::to_string(r.first_model) + " " + std::to_string(r.refused) + " " +
           std::to_string(r.not_sent) + " " + r.ops + "\n";
  s.record_refusal("exec:a", "reason: node: no float64", 3, 1, 0, {"relu"});
  s.record_backend_models({{"exec:a", 3, 1, 0, 0, 0.25}, {"exec:b", 3, 1, 1, 0, 0.5}});
  s.record_backend_models({{"exec:a", 4, 1, 0, 1, 0.5}});
  s.record_backend_models({{"exec:a", 3, 1, 0, 0, 0.25}});  // model 3 redone: counted once
  s.record_backend_models({});
  for (const auto& c : s.backend_counts())
    out += c.models.backend + " ran " + std::to_string(c.models.ran) + " crashed " + std::to_string(c.models.crashed) +
           " failed " + std::to_string(c.models.failed) + " " + std::to_string(c.models.seconds) + " s, refused " +
           std::to_string(c.refused) + " not sent " + std::to_string(c.not_sent) + " in " +
           std::to_string(c.refusals.size()) + " rows\n";
  using coverage::FactKind;
  s.record_coverage(
      {{"relu", FactKind::Op, "", 4}, {"relu", FactKind::Spc, "ab", 4}, {"exec:a", FactKind::Maps, "relu", -1}});
  s.record_coverage({{"relu", FactKind::Op, "", 2}, {"add", FactKind::Succ, "relu", 6}});
  s.record_coverage({{"exec:a", FactKind::Fused, "Conv+ReLU", 5}, {"exec:a", FactKind::Fused, "Conv+ReLU", 3, 2}});
  s.record_coverage({});
  for (const auto& f : s.coverage())
    out += f.subject + " " + coverage::to_string(f.kind) + " " + f.value + " " + std::to_string(f.model) +
           (f.kind == FactKind::Fused ? " in " + std::to_string(f.models) + " models" : "") + "\n";
  EXPECT_THROW(s.check_settings({{"seed", "8"}}), core::UserError);
  EXPECT_THROW(s.insert({s.findings()[0]}, {}), core::UserError);
  EXPECT_THROW(s.insert({}, {{2, 0, "t"}}), core::UserError);
  return out;
}

TEST(PostgresStore, HoldsWhatTheSqliteStoreHoldsAfterTheSameOperations) {
  START_SERVER(server);
  const fs::path tmp = testing::scratch("pgstore"), dir = tmp / "sqlite";
  const auto sqlite = open_sqlite_store(dir.string());
  const auto pg = open_store(server.url(), "unused");
  const std::string want = exercise(*sqlite);
  EXPECT_EQ(exercise(*pg), want);
  EXPECT_NE(want.find("relu"), std::string::npos) << want;
  EXPECT_NE(want.find("rc-relu /b/relu-r1/reduced entry-relu"), std::string::npos) << want;
  EXPECT_NE(want.find("known:entry-relu"), std::string::npos) << "its root cause is the entry's: " << want;
  EXPECT_NE(want.find("exec:a Erf (ONNX opset 13) 4 1 3 erf,gelu"), std::string::npos) << want;
  EXPECT_NE(want.find("exec:a fused Conv+ReLU 3 in 3 models"), std::string::npos) << "counts sum: " << want;
  EXPECT_NE(want.find("exec:a ran 2 crashed 0 failed 1 0.750000 s, refused 2 not sent 3 in 2 rows"), std::string::npos)
      << want;
  EXPECT_NE(want.find("exec:b ran 1 crashed 1 failed 0 0.500000 s, refused 1 not sent 2 in 1 rows"), std::string::npos)
      << want;
  EXPECT_EQ(pg->where().find("postgresql://"), 0u);
  fs::remove_all(tmp);
}

// A server restart drops the connection: the statement in flight fails, the next one reconnects.
TEST(PostgresStore, ReconnectsAfterTheServerRestarts) {
  START_SERVER(server);
  const auto s = open_store(server.url(), "unused");
  s->record(0, {finding("relu", "r")}, [](const oracle::Finding&) { return std::string("/b/relu"); });
  ASSERT_TRUE(server.restart());
  EXPECT_THROW(s->model_done(0), std::runtime_error);  // the dropped connection shows here
  EXPECT_TRUE(s->model_done(0));
  s->record(1, {finding("relu", "r")}, nullptr);
  EXPECT_TRUE(s->model_done(1));
  EXPECT_EQ(s->findings().at(0).hits, 2);
}

TEST(PostgresStore, AnUnreachableServerIsOneUserError) {
  const std::string missing = "postgresql:///campaign?host=" + testing::scratch("pgnone").string() + "&user=quorum";
  EXPECT_THROW(open_store(missing, "unused"), core::UserError);
  EXPECT_THROW(open_store("mysql://x", "unused"), core::UserError);
  fs::remove_all(testing::scratch("pgnone"));
}

// Two shards find the same new signature at once: the one whose row is in first writes the
// bundle; the other waits for its commit and only counts a hit. If the first rolls back, the
// second writes it. Opposite orders of two signatures do not deadlock.
TEST(PostgresStore, ANewSignatureFoundByTwoShardsAtOnceGetsOneBundle) {
  START_SERVER(server);
  const auto a = open_store(server.url(), "unused");
  const auto b = open_store(server.url(), "unused");
  std::atomic<int> bundles{0};
  int fresh_b = -1;
  std::thread other;
  a->record(0, {finding("relu", "r")}, [&](const oracle::Finding& f) {
    other = std::thread([&] {
      fresh_b = b->record(1, {finding("relu", "r2")},
                          [&](const oracle::Finding&) { return "/b/second" + std::to_string(++bundles); });
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // b's insert now waits on this row
    ++bundles;
    return "/b/first" + f.op;
  });
  other.join();
  EXPECT_EQ(bundles, 1);
  EXPECT_EQ(fresh_b, 0);
  auto all = a->findings();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].hits, 2);
  EXPECT_EQ(all[0].bundle, "/b/firstrelu");
  EXPECT_EQ(all[0].first_model, 0);

  // The first shard dies before its commit (its bundle writer throws): the second writes the bundle.
  EXPECT_THROW(a->record(2, {finding("exp", "e")},
                         [&](const oracle::Finding&) -> std::string {
                           other = std::thread([&] {
                             fresh_b = b->record(3, {finding("exp", "e2")},
                                                 [&](const oracle::Finding&) { return std::string("/b/exp-b"); });
                           });
                           std::this_thread::sleep_for(std::chrono::milliseconds(300));
                           throw std::runtime_error("killed");
                         }),
               std::runtime_error);
  other.join();
  EXPECT_EQ(fresh_b, 1);
  EXPECT_FALSE(a->model_done(2));
  all = a->findings();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].bundle, "/b/exp-b");
  EXPECT_EQ(all[1].hits, 1);
  EXPECT_EQ(all[1].first_model, 3);

  // Opposite orders of the same two new signatures, at once, many times: no deadlock error.
  std::thread t1([&] {
    for (int i = 0; i < 30; ++i)
      a->record(100 + 2 * i, {finding("sin", "s"), finding("cos", "c")}, [](const oracle::Finding& f) { return f.op; });
  });
  for (int i = 0; i < 30; ++i)
    b->record(101 + 2 * i, {finding("cos", "c"), finding("sin", "s")}, [](const oracle::Finding& f) { return f.op; });
  t1.join();
  for (const auto& f : a->findings()) {
    if (f.op == "sin" || f.op == "cos") {
      EXPECT_EQ(f.hits, 60) << f.signature;
    }
  }
}

// signature -> hits of a store.
std::map<std::string, int64_t> hits_of(Store& s) {
  std::map<std::string, int64_t> m;
  for (const auto& f : s.findings()) m[f.signature] = f.hits;
  return m;
}

pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

const int kModels = 240;
std::vector<std::string> fuzz_args(const std::string& out) {
  return {QUORUM_BINARY, "fuzz",
          "--generator", "unit",
          "--backends",  "faulty:all-numeric",
          "--models",    std::to_string(kModels),
          "--seed",      "11",
          "--reduce",    "0",
          "--out",       out};
}

TEST(PostgresCampaign, FourShardsOneKilledAndResumedEqualOneSqliteRun) {
  START_SERVER(server);
  const fs::path tmp = testing::scratch("pgshards");
  // The single SQLite run of the same seed and models.
  const std::string base = (tmp / "sqlite").string();
  auto args = fuzz_args(base);
  ASSERT_EQ(::waitpid(spawn(args, (tmp / "sqlite.log").string()), nullptr, 0) > 0, true);
  const auto single = open_sqlite_store(base);
  ASSERT_EQ(single->models_done(), kModels) << core::read_file((tmp / "sqlite.log").string());
  const auto want = hits_of(*single);
  ASSERT_GE(want.size(), 3u);

  // Four shards at once into the server, bundles in one directory.
  const std::string out = (tmp / "shared").string();
  std::vector<pid_t> pids;
  for (int i = 0; i < 4; ++i) {
    auto a = fuzz_args(out);
    for (const std::string& s :
         {std::string("--store"), server.url(), std::string("--shard"), std::to_string(i) + "/4"})
      a.push_back(s);
    pids.push_back(spawn(a, (tmp / ("shard" + std::to_string(i) + ".log")).string()));
  }
  // Shard 1 is killed once it has done a few of its 60 models.
  const auto watch = open_store(server.url(), "unused");
  std::map<std::string, int64_t> before;
  int64_t done1 = 0;
  for (int i = 0; i < 1200 && done1 < 8; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    done1 = 0;
    try {
      for (const auto& m : watch->models()) done1 += m.index % 4 == 1;
    } catch (const std::exception&) {  // the tables are not there yet
    }
  }
  ::kill(pids[1], SIGKILL);
  int status = 0;
  ::waitpid(pids[1], &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status)) << "shard 1 ended before it was killed: "
                                   << core::read_file((tmp / "shard1.log").string());
  before = hits_of(*watch);
  for (int i : {0, 2, 3}) {
    ::waitpid(pids[i], &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << core::read_file((tmp / ("shard" + std::to_string(i) + ".log")).string());
  }
  int64_t left = 0;
  for (const auto& m : watch->models()) left += m.index % 4 == 1;
  EXPECT_LT(left, kModels / 4) << "shard 1 was killed after its last model";

  // Shard 1 resumes: only its models not yet done.
  auto a = fuzz_args(out);
  for (const std::string& s : {std::string("--store"), server.url(), std::string("--shard"), std::string("1/4")})
    a.push_back(s);
  ::waitpid(spawn(a, (tmp / "resume.log").string()), &status, 0);
  const std::string resume_log = core::read_file((tmp / "resume.log").string());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << resume_log;
  EXPECT_NE(resume_log.find("resuming:"), std::string::npos) << resume_log;
  EXPECT_NE(resume_log.find("when every shard has finished, quorum report"), std::string::npos) << resume_log;

  EXPECT_EQ(watch->models_done(), kModels);
  const auto models = watch->models();
  for (int i = 0; i < kModels; ++i) EXPECT_EQ(models.at(i).index, i);
  EXPECT_EQ(hits_of(*watch), want);  // nothing lost, nothing counted twice
  // Per-backend counts too: one row per model and backend, the killed shard's redone model counted once.
  auto counts_of = [](Store& s) {
    std::string out;
    for (const auto& c : s.backend_counts())
      out += c.models.backend + " models " + std::to_string(c.models.model) + " ran " + std::to_string(c.models.ran) +
             " crashed " + std::to_string(c.models.crashed) + " failed " + std::to_string(c.models.failed) + "\n";
    return out;
  };
  EXPECT_EQ(counts_of(*watch), counts_of(*single));
  EXPECT_NE(counts_of(*single).find("faulty:all-numeric models 240 ran 240 "), std::string::npos)
      << counts_of(*single);
  for (const auto& [sig, hits] : before) EXPECT_TRUE(want.count(sig)) << sig;
  // One complete bundle per finding, in the shared directory; no temporary directory left.
  for (const auto& f : watch->findings()) {
    EXPECT_TRUE(fs::exists(fs::path(f.bundle) / "finding.json")) << f.bundle;
    EXPECT_EQ(fs::path(f.bundle).parent_path(), fs::path(out) / "bundles");
  }
  size_t dirs = 0;
  for (const auto& e : fs::directory_iterator(fs::path(out) / "bundles")) {
    EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u) << e.path();
    ++dirs;
  }
  EXPECT_EQ(dirs, want.size());  // one bundle per signature (a killed shard's uncommitted one is replaced)

  // The report of the shared store.
  const testing::Result r = testing::run_quorum("report " + out + " --store '" + server.url() + "'", "pgshards");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(fs::path(out) / "report.html"));
  fs::remove_all(tmp);
}

// examples/slurm/quorum-shards.sbatch as two array tasks (run with bash, the variables Slurm sets
// given by hand), against the test's server.
TEST(PostgresCampaign, TheSlurmExampleRunsEachArrayTaskAsAShard) {
  START_SERVER(server);
  const fs::path tmp = testing::scratch("pgslurm");
  const std::string url = server.database("slurm");
  ASSERT_FALSE(url.empty());
  const std::string script = std::string(QUORUM_SOURCE_DIR) + "/examples/slurm/quorum-shards.sbatch";
  for (int task = 0; task < 2; ++task) {
    const std::string cmd = "SLURM_ARRAY_TASK_ID=" + std::to_string(task) +
                            " SLURM_ARRAY_TASK_COUNT=2 SLURM_ARRAY_TASK_MIN=0 QUORUM=" + QUORUM_BINARY +
                            " QUORUM_STORE='" + url + "' QUORUM_OUT=" + (tmp / "c").string() +
                            " QUORUM_MODELS=20 QUORUM_SEED=5 QUORUM_GENERATOR=unit QUORUM_BACKENDS=faulty:all-numeric"
                            " QUORUM_ARGS='--reduce 0' bash " +
                            script + " >" + (tmp / "log").string() + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << core::read_file((tmp / "log").string());
    EXPECT_NE(core::read_file((tmp / "log").string()).find("shard " + std::to_string(task) + "/2"), std::string::npos);
  }
  const auto store = open_store(url, "unused");
  EXPECT_EQ(store->models_done(), 20);
  EXPECT_EQ(store->setting("seed").value_or(""), "5");
  // Without the array's variables the script says what is missing and does nothing.
  const std::string bare = "bash " + script + " >/dev/null 2>&1";
  EXPECT_NE(std::system(bare.c_str()), 0);
  fs::remove_all(tmp);
}

// The same script submitted for real: a single-node Slurm this test starts runs it as a job array
// of four tasks (sbatch --array=0-3 --wait), after `sbatch --test-only` accepted it.
TEST(PostgresCampaign, TheSlurmExampleRunsAsAJobArrayOnASingleNodeSlurm) {
  if (const std::string why = testing::SlurmCluster::unavailable(); !why.empty()) GTEST_SKIP() << why;
  START_SERVER(server);
  testing::SlurmCluster slurm;
  ASSERT_TRUE(slurm.ok()) << slurm.error();
  const std::string url = server.database("slurm");
  ASSERT_FALSE(url.empty());
  const fs::path tmp = testing::scratch("pgslurmd");
  const std::string env = std::string("QUORUM=") + QUORUM_BINARY + " QUORUM_STORE='" + url +
                          "' QUORUM_OUT=" + (tmp / "c").string() +
                          " QUORUM_MODELS=40 QUORUM_SEED=5 QUORUM_GENERATOR=unit QUORUM_BACKENDS=faulty:all-numeric"
                          " QUORUM_ARGS='--reduce 0' ";
  const std::string script = std::string(QUORUM_SOURCE_DIR) + "/examples/slurm/quorum-shards.sbatch";
  const std::string log = (tmp / "sbatch.log").string();
  const std::string at = "cd " + tmp.string() + " && ";
  ASSERT_EQ(std::system((at + env + "sbatch --test-only --array=0-3 " + script + " >" + log + " 2>&1").c_str()), 0)
      << core::read_file(log);
  EXPECT_NE(core::read_file(log).find("to start at"), std::string::npos) << core::read_file(log);
  // Bounded: a job that never runs fails the test after two minutes.
  const int rc = std::system(
      (at + env + "timeout 120 sbatch --wait --array=0-3 --cpus-per-task=1 " + script + " >" + log + " 2>&1").c_str());
  std::string logs = core::read_file(log);
  for (const auto& e : fs::directory_iterator(tmp))
    if (e.path().filename().string().rfind("quorum-shard-", 0) == 0) logs += core::read_file(e.path().string());
  ASSERT_EQ(rc, 0) << logs;
  for (int i = 0; i < 4; ++i)
    EXPECT_NE(logs.find("shard " + std::to_string(i) + "/4: model indices"), std::string::npos) << logs;
  const auto store = open_store(url, "unused");
  EXPECT_EQ(store->models_done(), 40);
  // The same models as one SQLite run.
  const testing::Result r =
      testing::run_quorum("fuzz --generator unit --backends faulty:all-numeric --models 40 --seed 5 --reduce 0 --out " +
                              (tmp / "single").string(),
                          "pgslurmd");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(hits_of(*store), hits_of(*open_sqlite_store((tmp / "single").string())));
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace quorum::store
