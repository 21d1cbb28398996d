// The cluster test, on loopback: nats-server with JetStream, and launcher processes
// started as a Kubernetes StatefulSet starts its pods (POD_NAME=redwood-<ordinal>,
// REDWOOD_REPLICAS, `redwood run FILE --shard statefulset`), running one file of 24 paced
// synthetic streams into a `nats` sink. Checked: every stream has exactly one owner; every
// frame's message is stored exactly once per stream and in order (by its Nats-Msg-Id
// `<pipeline>/<stream>/<seq>` and its `seq`); `kill -9` of a worker mid-run and its restart with
// the same environment loses nothing JetStream had stored and completes the worker's streams;
// going from 2 to 3 workers moves exactly the streams the new worker owns, at most half of them.
// The figures go to lines starting with "cluster:".
//
// Every process a test starts is stopped by the test itself, on failure too (Worker's and
// NatsServer's destructors). Skipped, saying why, when nats-server is not installed.

#if __has_include(<nats/nats.h>)

#include "pipelines/shard.hpp"
#include "support/nats_harness.hpp"
#include "support/onnx_builder.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nats/nats.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

extern char** environ;

namespace redwood {
namespace {

using Clock = std::chrono::steady_clock;
using testing::free_port;
using testing::nats_server_path;
using testing::NatsServer;
using testing::read_stream;
using testing::Received;
using testing::StreamCounts;

// 24 streams of 120 frames at 30 fps: a run lasts 4 s, long enough to kill a worker mid-run;
// 32x24 frames and no model keep two workers and the server light on a 2-core machine.
constexpr int kStreams = 24;
constexpr int kFrames = 120;
constexpr int kFps = 30;
constexpr auto kRunDeadline = std::chrono::seconds(kFrames / kFps + 25);  // a loaded machine's start-up

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One launcher process, a StatefulSet's pod: `redwood run FILE --shard statefulset --quiet
// [extra]` with POD_NAME=redwood-<ordinal> and REDWOOD_REPLICAS=<replicas> (the rest of the
// environment inherited), its stdout and stderr in files named after it. Still running at the
// destructor: SIGKILL and reaped.
class Worker {
 public:
  Worker(const std::filesystem::path& file, int ordinal, int replicas, const std::filesystem::path& dir,
         const std::string& label, const std::vector<std::string>& extra = {})
      : name_("redwood-" + std::to_string(ordinal)), out_(dir / (label + ".out")), err_(dir / (label + ".err")) {
    // Everything the child needs is built before fork: the test process has threads (the NATS
    // client's), after fork only async-signal-safe calls are made.
    std::vector<std::string> args{REDWOOD_BINARY, "run", file.string(), "--shard", "statefulset", "--quiet"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string var = *e;
      if (var.rfind("POD_NAME=", 0) != 0 && var.rfind("REDWOOD_REPLICAS=", 0) != 0) env.push_back(var);
    }
    env.push_back("POD_NAME=" + name_);
    env.push_back("REDWOOD_REPLICAS=" + std::to_string(replicas));
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    for (auto& e : env) envp.push_back(e.data());
    argv.push_back(nullptr);
    envp.push_back(nullptr);
    const std::string out = out_.string(), err = err_.string();
    started_ = Clock::now();
    pid_ = fork();
    if (pid_ == 0) {
      const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0) _exit(126);
      execve(argv[0], argv.data(), envp.data());
      const char why[] = "cluster test: cannot execute the launcher (REDWOOD_BINARY)\n";
      (void)!write(2, why, sizeof why - 1);
      _exit(127);
    }
    EXPECT_GT(pid_, 0) << "fork failed";
  }
  ~Worker() { kill9(); }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  /// kill -9 and reap (nothing when it already ended).
  void kill9() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, &status_, 0);
    pid_ = -1;
  }

  bool running() {
    if (pid_ <= 0) return false;
    if (waitpid(pid_, &status_, WNOHANG) == pid_) pid_ = -1;
    return pid_ > 0;
  }

  /// Waits for the process to end by itself until `deadline`; then kills it. Its exit code, or -1
  /// when it had to be killed or ended by a signal.
  int wait(Clock::time_point deadline) {
    while (running() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (running()) {
      ADD_FAILURE() << name_ << " still running at the deadline; killed. stderr:\n" << err();
      kill9();
      return -1;
    }
    return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
  }

  /// Its shard line ("shard I/N: K of T stream(s): a, b"), waited for until `deadline`: the
  /// streams it owns. Fails when the line is absent or does not name every owned stream.
  std::set<std::string> owned(Clock::time_point deadline) {
    static const std::regex line(R"(^shard (\d+)/(\d+): (\d+) of (\d+) stream\(s\)(?:: (.*))?$)");
    for (;;) {
      const bool alive = running();  // before reading: a process that ended has written everything
      std::istringstream in(out());
      for (std::string l; std::getline(in, l);) {
        std::smatch m;
        if (!std::regex_match(l, m, line)) continue;
        std::set<std::string> names;
        std::istringstream list(m[5].str());
        for (std::string n; std::getline(list, n, ',');) names.insert(n.substr(n.find_first_not_of(' ')));
        EXPECT_EQ(std::to_string(names.size()), m[3].str()) << name_ << ": the shard line names fewer streams than it owns: " << l;
        EXPECT_EQ(m[4].str(), std::to_string(kStreams)) << l;
        return names;
      }
      if (!alive || Clock::now() >= deadline) {
        ADD_FAILURE() << name_ << ": no shard line. stdout:\n" << out() << "\nstderr:\n" << err();
        return {};
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  /// The summary's "sink js: written N" (-1 when absent: the process did not finish).
  std::int64_t written() const {
    static const std::regex line(R"(sink js: written (\d+))");
    std::smatch m;
    const std::string text = out();
    return std::regex_search(text, m, line) ? std::stoll(m[1].str()) : -1;
  }

  std::string out() const { return read_text(out_); }
  std::string err() const { return read_text(err_); }
  const std::string& name() const { return name_; }
  Clock::time_point started() const { return started_; }

 private:
  std::string name_;
  std::filesystem::path out_, err_;
  pid_t pid_ = -1;
  int status_ = 0;
  Clock::time_point started_;
};

// Every message published on redwood.> as the server routes it (a core subscription, which sees
// the duplicates that JetStream then does not store), with its id and when it arrived.
class Tap {
 public:
  struct Seen {
    std::string id;
    Clock::time_point at;
  };
  explicit Tap(const std::string& url) {
    EXPECT_EQ(natsConnection_ConnectTo(&nc_, url.c_str()), NATS_OK);
    if (nc_ == nullptr) return;
    EXPECT_EQ(natsConnection_Subscribe(&sub_, nc_, "redwood.>", &Tap::on_message, this), NATS_OK);
    if (sub_ != nullptr) natsSubscription_SetPendingLimits(sub_, -1, -1);  // never a slow consumer's drop
    natsConnection_Flush(nc_);  // subscribed at the server before any worker starts
  }
  ~Tap() {
    if (sub_ != nullptr) natsSubscription_Destroy(sub_);
    if (nc_ != nullptr) natsConnection_Destroy(nc_);
  }
  Tap(const Tap&) = delete;
  Tap& operator=(const Tap&) = delete;

  std::vector<Seen> seen() {
    natsConnection_Flush(nc_);  // what the server routed before now has arrived
    std::lock_guard lock(mutex_);
    return seen_;
  }
  std::int64_t dropped() {
    std::int64_t d = 0;
    if (sub_ != nullptr) natsSubscription_GetDropped(sub_, &d);
    return d;
  }

 private:
  static void on_message(natsConnection*, natsSubscription*, natsMsg* m, void* self) {
    auto* tap = static_cast<Tap*>(self);
    const char* id = nullptr;
    Seen s{natsMsgHeader_Get(m, "Nats-Msg-Id", &id) == NATS_OK ? id : "", Clock::now()};
    natsMsg_Destroy(m);
    std::lock_guard lock(tap->mutex_);
    tap->seen_.push_back(std::move(s));
  }
  natsConnection* nc_ = nullptr;
  natsSubscription* sub_ = nullptr;
  std::mutex mutex_;
  std::vector<Seen> seen_;
};

std::vector<std::string> stream_names() {
  std::vector<std::string> names;
  for (int i = 0; i < kStreams; ++i) names.push_back(fmt::format("cam-{:02}", i));
  return names;
}

// The pipeline file every worker runs: one list entry standing for kStreams paced synthetic
// streams, into JetStream stream CLUSTER through the server at `url`.
std::filesystem::path write_pipeline(const std::filesystem::path& dir, const std::string& url) {
  {
    std::ofstream list(dir / "cams.txt");
    list << "# one synthetic camera a line\n";
    for (const auto& n : stream_names()) list << n << "\n";
  }
  const auto file = dir / "cluster.yaml";
  std::ofstream(file) << "version: 1\nname: cluster\nsources:\n"
                      << "  - {name: cams, type: synthetic, list: " << (dir / "cams.txt").string()
                      << ", width: 32, height: 24, frames: " << kFrames << ", fps: " << kFps << "}\n"
                      << "sinks:\n  - {name: js, type: nats, url: '" << url << "', stream: CLUSTER}\n";
  return file;
}

std::string subject_of(const std::string& pipeline, const std::string& stream) { return "redwood." + pipeline + "." + stream; }

// Every worker's streams: pairwise disjoint and together all of them. Returns stream -> ordinal.
std::map<std::string, int> check_ownership(const std::vector<std::set<std::string>>& owned) {
  std::map<std::string, int> owner;
  for (std::size_t k = 0; k < owned.size(); ++k) {
    for (const auto& s : owned[k]) {
      const auto [it, fresh] = owner.emplace(s, static_cast<int>(k));
      EXPECT_TRUE(fresh) << s << " owned by worker " << it->second << " and by worker " << k;
    }
  }
  for (const auto& s : stream_names()) EXPECT_TRUE(owner.count(s)) << s << " owned by no worker of " << owned.size();
  EXPECT_EQ(owner.size(), static_cast<std::size_t>(kStreams));
  // The launcher's hashing is the library's (pipelines/shard.hpp), the same in every build.
  for (const auto& [s, k] : owner) EXPECT_EQ(owner_of(s, static_cast<int>(owned.size())), k) << s;
  return owner;
}

// The stored messages of `pipeline`: each stream's frames 0..kFrames-1, each exactly once, in
// order, under the documented subject and id.
void check_exactly_once(const std::vector<Received>& got, const std::string& pipeline) {
  std::map<std::string, std::vector<std::int64_t>> seqs;
  for (const auto& r : got) {
    if (r.message.at("pipeline") != pipeline) continue;
    const std::string stream = r.message.at("stream");
    const std::int64_t seq = r.message.at("seq");
    EXPECT_EQ(r.subject, subject_of(pipeline, stream));
    EXPECT_EQ(r.id, pipeline + "/" + stream + "/" + std::to_string(seq));
    seqs[stream].push_back(seq);
  }
  EXPECT_EQ(seqs.size(), static_cast<std::size_t>(kStreams)) << pipeline;
  std::vector<std::int64_t> all(kFrames);
  for (int i = 0; i < kFrames; ++i) all[static_cast<std::size_t>(i)] = i;
  for (const auto& [stream, s] : seqs) EXPECT_EQ(s, all) << pipeline << "/" << stream << ": not every frame once, in order";
}

class Cluster : public ::testing::Test {
 protected:
  void SetUp() override {
    if (nats_server_path().empty()) GTEST_SKIP() << "nats-server is not installed (apt-get install nats-server)";
    dir_ = testing::temp_dir("cluster");
    std::filesystem::create_directories(dir_ / "nats");
    port_ = free_port();
    server_ = std::make_unique<NatsServer>(port_, dir_ / "nats");
    server_->start();
    // The JetStream stream exists before the workers start, as a deployment provisions it (the
    // sinks would create it otherwise; the NATS sink's own tests cover that).
    testing::create_stream(server_->url(), "CLUSTER");
    file_ = write_pipeline(dir_, server_->url());
  }
  bool server_alive() const { return testing::port_open(port_); }
  int port_ = 0;
  std::filesystem::path dir_, file_;
  std::unique_ptr<NatsServer> server_;
};

TEST_F(Cluster, KillNineAndRestartLosesNothingStoredAndCompletesItsStreams) {
  Tap tap(server_->url());
  StreamCounts counts(server_->url(), "CLUSTER");
  const auto start = Clock::now();
  Worker w0(file_, 0, 2, dir_, "redwood-0");
  Worker w1(file_, 1, 2, dir_, "redwood-1");  // the one killed
  const auto owned0 = w0.owned(start + kRunDeadline), victim = w1.owned(start + kRunDeadline);
  check_ownership({owned0, victim});
  ASSERT_FALSE(victim.empty());
  const auto victim_count = [&](const testing::StreamCounts::Snapshot& snap) {
    std::uint64_t n = 0;
    for (const auto& s : victim) n += snap.per_subject.count(subject_of("cluster", s)) ? snap.per_subject.at(subject_of("cluster", s)) : 0;
    return n;
  };

  // Mid-run: once JetStream holds a quarter of redwood-1's frames, kill -9.
  const std::uint64_t victim_frames = victim.size() * kFrames;
  while (victim_count(counts()) < victim_frames / 4 && Clock::now() < start + kRunDeadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(w1.running()) << "redwood-1 ended before it could be killed mid-run. stderr:\n" << w1.err();
  const auto killed = Clock::now();
  w1.kill9();
  // What it left stored: the counts once they stop changing (what it had sent is in the server
  // within milliseconds; a pod's restart takes longer than that too).
  auto at_kill = counts();
  for (const auto settle = Clock::now() + std::chrono::seconds(5); Clock::now() < settle;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto now = counts();
    if (victim_count(now) == victim_count(at_kill)) break;
    at_kill = now;
  }
  const std::uint64_t stored_at_kill = victim_count(at_kill);
  ASSERT_GT(stored_at_kill, 0u);
  ASSERT_LT(stored_at_kill, victim_frames) << "the kill came after redwood-1's last frame";

  // Kubernetes restarts the pod: the same name, the same environment. The checks below hold
  // whether it resumes each stream after what JetStream holds (the nats sink's `resume`) or
  // sends every frame again (JetStream then drops the repeats by their ids); the figures say
  // which it did.
  Worker w1b(file_, 1, 2, dir_, "redwood-1.restarted");
  const auto restarted = w1b.started();
  EXPECT_EQ(w1b.owned(restarted + kRunDeadline), victim) << "the restarted pod owns what it owned";
  EXPECT_EQ(w0.wait(start + kRunDeadline), 0) << w0.err();
  EXPECT_EQ(w1b.wait(restarted + kRunDeadline), 0) << w1b.err();

  ASSERT_TRUE(server_alive()) << "nats-server ended during the run; its log: " << (dir_ / "nats" / "server.log").string();
  const auto got = read_stream(server_->url(), "CLUSTER", kStreams * kFrames);
  EXPECT_EQ(got.size(), static_cast<std::size_t>(kStreams * kFrames));
  check_exactly_once(got, "cluster");
  // Stored before the kill and still there: the stream's first messages (JetStream order) are
  // the at_kill ones, per stream the frames 0..count-1.
  ASSERT_GE(got.size(), at_kill.total);
  std::map<std::string, std::int64_t> prefix;
  for (std::size_t i = 0; i < at_kill.total; ++i) {
    const std::string stream = got[i].message.at("stream");
    EXPECT_EQ(got[i].message.at("seq").get<std::int64_t>(), prefix[stream]++) << stream;
  }
  for (const auto& s : victim) {
    EXPECT_EQ(static_cast<std::uint64_t>(prefix[s]), at_kill.per_subject[subject_of("cluster", s)]) << s;
  }

  // Figures. What the server saw published: each id once, plus the repeats JetStream dropped.
  const auto seen = tap.seen();
  std::set<std::string> ids;
  std::int64_t repeats = 0;
  double first_after_spawn = -1, first_new_after_spawn = -1;
  for (const auto& s : seen) {
    if (!ids.insert(s.id).second) ++repeats;
    if (s.at < restarted) continue;
    const auto slash = s.id.rfind('/');
    const std::string stream = s.id.substr(s.id.find('/') + 1, slash - s.id.find('/') - 1);
    if (!victim.count(stream)) continue;
    const double t = seconds_between(restarted, s.at);
    if (first_after_spawn < 0) first_after_spawn = t;
    const std::uint64_t seq = std::stoull(s.id.substr(slash + 1));
    if (first_new_after_spawn < 0 && seq >= at_kill.per_subject[subject_of("cluster", stream)]) first_new_after_spawn = t;
  }
  EXPECT_EQ(tap.dropped(), 0);
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kStreams * kFrames));
  EXPECT_GE(first_new_after_spawn, 0) << "no new frame of redwood-1's streams after its restart";
  const double spawn_after_kill = seconds_between(killed, restarted);
  const std::int64_t written_after = w1b.written();
  const std::int64_t new_after = static_cast<std::int64_t>(victim_frames - stored_at_kill);
  std::printf("cluster: %d streams of %d frames at %d fps; streams per worker: redwood-0 %zu, redwood-1 %zu\n", kStreams, kFrames,
              kFps, owned0.size(), victim.size());
  std::printf("cluster: kill -9 of redwood-1 after %.2f s of run, %llu of its %llu frames stored; restarted %.2f s after the kill\n",
              seconds_between(start, killed), static_cast<unsigned long long>(stored_at_kill),
              static_cast<unsigned long long>(victim_frames), spawn_after_kill);
  std::printf("cluster: frames produced %d (%d per stream), stored %zu, every stream %d of %d once in order; stored before the "
              "kill and kept: %llu\n",
              kStreams * kFrames, kFrames, got.size(), kFrames, kFrames, static_cast<unsigned long long>(stored_at_kill));
  std::printf("cluster: published %zu messages, %zu distinct ids: duplicates removed by JetStream %lld; the restarted worker "
              "wrote %lld, %lld of them new (%s)\n",
              seen.size(), ids.size(), static_cast<long long>(repeats), static_cast<long long>(written_after),
              static_cast<long long>(new_after),
              written_after == new_after ? "it resumed after what JetStream held"
              : written_after == static_cast<std::int64_t>(victim_frames) ? "it replayed from frame 0"
                                                                          : "partly replayed");
  std::printf("cluster: recovery after kill -9: first message of the restarted worker %.2f s after its spawn, first new frame "
              "%.2f s after its spawn (%.2f s after the kill)\n",
              first_after_spawn, first_new_after_spawn, first_new_after_spawn + spawn_after_kill);
}

TEST_F(Cluster, RescaleTwoToThreeMovesOnlyTheNewWorkersStreams) {
  // Two workers, then three running the same file. The second run names its pipeline 'rescaled'
  // (--set): its ids and subjects are its own in the same JetStream stream, so its exactly-once
  // check is not helped by de-duplication against the first run's messages.
  std::vector<std::set<std::string>> two, three;
  {
    const auto start = Clock::now();
    Worker w0(file_, 0, 2, dir_, "two-0"), w1(file_, 1, 2, dir_, "two-1");
    two = {w0.owned(start + kRunDeadline), w1.owned(start + kRunDeadline)};
    EXPECT_EQ(w0.wait(start + kRunDeadline), 0) << w0.err();
    EXPECT_EQ(w1.wait(start + kRunDeadline), 0) << w1.err();
  }
  {
    const auto start = Clock::now();
    std::vector<std::unique_ptr<Worker>> w;
    for (int k = 0; k < 3; ++k) {
      w.push_back(std::make_unique<Worker>(file_, k, 3, dir_, "three-" + std::to_string(k), std::vector<std::string>{"--set", "name=rescaled"}));
    }
    for (auto& worker : w) three.push_back(worker->owned(start + kRunDeadline));
    for (auto& worker : w) EXPECT_EQ(worker->wait(start + kRunDeadline), 0) << worker->err();
  }
  const auto before = check_ownership(two), after = check_ownership(three);
  std::set<std::string> moved;
  for (const auto& [s, k] : before) {
    if (after.at(s) != k) moved.insert(s);
  }
  EXPECT_EQ(moved, three[2]) << "the streams that move are exactly the new worker's";
  EXPECT_GT(moved.size(), 0u);
  EXPECT_LE(moved.size(), static_cast<std::size_t>(kStreams / 2));

  ASSERT_TRUE(server_alive()) << "nats-server ended during the run; its log: " << (dir_ / "nats" / "server.log").string();
  const auto got = read_stream(server_->url(), "CLUSTER", 2 * kStreams * kFrames);
  EXPECT_EQ(got.size(), static_cast<std::size_t>(2 * kStreams * kFrames));
  check_exactly_once(got, "cluster");
  check_exactly_once(got, "rescaled");
  std::printf("cluster: rescale 2 -> 3 workers: streams per worker %zu, %zu -> %zu, %zu, %zu; %zu of %d streams moved (%.1f %%, "
              "ideal 33.3 %%), all onto the new worker; both runs every frame once in order (%zu messages)\n",
              two[0].size(), two[1].size(), three[0].size(), three[1].size(), three[2].size(), moved.size(), kStreams,
              100.0 * static_cast<double>(moved.size()) / kStreams, got.size());
}

}  // namespace
}  // namespace redwood

#endif
