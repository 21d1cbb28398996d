// The worker count found at run time (`--shard statefulset` with REDWOOD_PEERS): the variables
// and their mistakes, the real lookup (a numeric address, a name that cannot resolve), the wait at
// start, the two-in-a-row rule check by check, the watch thread, and a run that re-shards in
// process when an injected count goes 2 -> 3 -> 2: it stops, runs again with the streams
// rendezvous hashing gives it, and keeps and loses (then regains) exactly the streams it says.

#include "pipelines/peer_count.hpp"
#include "pipelines/pipeline_text.hpp"
#include "pipelines/reshard.hpp"
#include "pipelines/shard.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <thread>

namespace redwood {
namespace {

using namespace std::chrono_literals;

StatefulSetEnv env(const char* pod, const char* replicas, const char* peers, const char* interval = nullptr) {
  StatefulSetEnv e;
  e.pod_name = pod;
  e.replicas = replicas;
  e.peers = peers;
  e.peers_interval = interval;
  return e;
}

std::string error_of(const StatefulSetEnv& e) {
  return testing::message_of<InvalidArgument>([&] { read_statefulset(e); });
}

TEST(PeerCountEnv, ReplicasFixTheCountPeersFollowIt) {
  StatefulSetShard s = read_statefulset(env("redwood-cams-2", nullptr, "redwood-cams"));
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.replicas, 0);
  EXPECT_EQ(s.peers, "redwood-cams");
  EXPECT_EQ(s.peers_interval_s, 10);
  // REDWOOD_REPLICAS wins: a fixed count, no lookup.
  s = read_statefulset(env("redwood-cams-2", "3", "redwood-cams"));
  EXPECT_EQ(s.replicas, 3);
  EXPECT_TRUE(s.peers.empty());
  EXPECT_EQ(read_statefulset(env("redwood-0", "", "redwood", "0.5")).peers_interval_s, 0.5);  // empty: unset
  EXPECT_EQ(read_statefulset(env("redwood-0", nullptr, "redwood", "3600")).peers_interval_s, 3600);
  EXPECT_EQ(read_statefulset(env("redwood-0", nullptr, "redwood", "0.1")).peers_interval_s, 0.1);
}

TEST(PeerCountEnv, MistakesNameTheVariable) {
  EXPECT_NE(error_of(env("redwood-1", nullptr, nullptr))
                .find("neither REDWOOD_REPLICAS (a fixed worker count) nor REDWOOD_PEERS (the StatefulSet's headless "
                      "Service, whose addresses count the workers) is set"),
            std::string::npos);
  EXPECT_NE(error_of(env("redwood-1", "", "")).find("neither REDWOOD_REPLICAS"), std::string::npos);
  EXPECT_NE(error_of(env(nullptr, nullptr, "redwood")).find("neither POD_NAME nor HOSTNAME is set"), std::string::npos);
  EXPECT_NE(error_of(env("redwood", nullptr, "redwood")).find("POD_NAME='redwood' does not end in -<ordinal>"),
            std::string::npos);
  // The ordinal bound applies to a fixed count only: with peers, a worker counts itself.
  EXPECT_NE(error_of(env("redwood-3", "3", nullptr)).find("ordinal 3, not below REDWOOD_REPLICAS=3"), std::string::npos);
  EXPECT_EQ(read_statefulset(env("redwood-3", nullptr, "redwood")).index, 3);
  for (const char* bad : {"0", "0.05", "3601", "-1", "abc", "10s", " 1", "1 ", "inf", "nan", "1e9", "+5"}) {
    const std::string e = error_of(env("redwood-0", nullptr, "redwood", bad));
    EXPECT_NE(e.find(std::string("REDWOOD_PEERS_INTERVAL='") + bad + "' is not a number of seconds from 0.1 to 3600 "
                                                                    "(default 10)"),
              std::string::npos)
        << bad << ": " << e;
  }
  // Checked with a fixed count too, where it is unused.
  EXPECT_NE(error_of(env("redwood-0", "2", nullptr, "x")).find("REDWOOD_PEERS_INTERVAL='x'"), std::string::npos);
}

// A numeric address resolves without /etc/hosts or a DNS server (a minimal Debian root has no
// /etc/hosts, so even 'localhost' goes to DNS there and may not resolve).
TEST(PeerCountDns, AnAddressCountsOneAndANameThatCannotResolveSaysSo) {
  EXPECT_EQ(count_peers("127.0.0.1"), 1);
  // .invalid never resolves (RFC 6761).
  EXPECT_THROWS_SAYING(count_peers("redwood-no-such-service.invalid"), IoError,
                       "cannot resolve 'redwood-no-such-service.invalid': ");
  EXPECT_THROWS_SAYING(peer_count_now("redwood-no-such-service.invalid", 0), IoError,
                       "--shard statefulset: REDWOOD_PEERS: cannot resolve");
  EXPECT_EQ(peer_count_now("127.0.0.1", 4), 5) << "ordinal 4 counts at least 5 workers";
}

TEST(PeerCountDns, WorkersCountedAreAtLeastTheOrdinalPlusOne) {
  EXPECT_EQ(workers_counted(3, 0), 3);
  EXPECT_EQ(workers_counted(1, 2), 3);
  EXPECT_EQ(workers_counted(0, 0), 1);
  EXPECT_EQ(workers_counted(1 << 30, 0), kMaxShards);
}

TEST(PeerCountStart, RetriesUntilTheCountAnswersThenGivesUpSayingWhy) {
  int calls = 0;
  const PeerCounter late = [&calls] {
    if (++calls < 3) throw IoError("cannot resolve 'p': Name or service not known");
    return 2;
  };
  EXPECT_EQ(first_peer_count(late, 0, 0.1, "REDWOOD_PEERS='p'"), 2);  // retries every 0.1 s for up to 0.3 s
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(first_peer_count([] { return 1; }, 2, 0.1, "x"), 3);
  calls = 0;
  const PeerCounter never = [&calls]() -> int {
    ++calls;
    throw IoError("cannot resolve 'p': Name or service not known");
  };
  EXPECT_THROWS_SAYING(first_peer_count(never, 0, 0.1, "REDWOOD_PEERS='p'"), IoError,
                       "--shard statefulset: REDWOOD_PEERS='p': cannot resolve 'p': Name or service not known (retried "
                       "for 0.3 s: 3 x REDWOOD_PEERS_INTERVAL)");
  EXPECT_GE(calls, 2);
  EXPECT_LE(calls, 4);
}

TEST(PeerCountFollower, ANewCountNeedsTwoChecksInARow) {
  PeerCountFollower f(1, 2);
  EXPECT_EQ(f.current(), 2);
  EXPECT_EQ(f.seen(2), std::nullopt);
  EXPECT_EQ(f.seen(3), std::nullopt) << "once: not yet";
  EXPECT_EQ(f.seen(3), 3) << "twice in a row";
  EXPECT_EQ(f.current(), 3);
  EXPECT_EQ(f.seen(3), std::nullopt) << "the current count is no change";
  // A pod seen once during a rolling change, then gone: no change.
  EXPECT_EQ(f.seen(4), std::nullopt);
  EXPECT_EQ(f.seen(3), std::nullopt);
  EXPECT_EQ(f.seen(4), std::nullopt);
  EXPECT_EQ(f.current(), 3);
  // Two different new counts in a row are not the same count twice: the later one starts a row.
  EXPECT_EQ(f.seen(5), std::nullopt);
  EXPECT_EQ(f.seen(4), std::nullopt);
  EXPECT_EQ(f.seen(4), 4);
  EXPECT_EQ(f.current(), 4);
  // A failed check breaks the row and keeps the count.
  EXPECT_EQ(f.seen(2), std::nullopt);
  f.failed();
  EXPECT_EQ(f.seen(2), std::nullopt);
  EXPECT_EQ(f.current(), 4);
  EXPECT_EQ(f.seen(2), 2);
  // A worker counts itself: ordinal 1 with DNS listing no one yet is still 2 workers.
  EXPECT_EQ(f.seen(1), std::nullopt);
  EXPECT_EQ(f.seen(0), std::nullopt);
  EXPECT_EQ(f.current(), 2);
  PeerCountFollower high(5, 2);
  EXPECT_EQ(high.current(), 6);
}

// Waits until `done` holds, up to 10 s (the checks run every few ms; the bound only ends a hang).
template <class F>
bool eventually(F done) {
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

TEST(PeerWatch, FollowsTheCountAndLogsAFailingLookupOnce) {
  std::atomic<int> peers{2};
  std::atomic<bool> failing{false};
  testing::LogCapture log;
  PeerWatch watch(
      [&]() -> int {
        if (failing) throw IoError("cannot resolve 'p': Temporary failure in name resolution");
        return peers.load();
      },
      0, 2, 0.005, "REDWOOD_PEERS='p'");
  EXPECT_EQ(watch.count(), 2);
  peers = 3;
  ASSERT_TRUE(eventually([&] { return watch.count() == 3; }));
  failing = true;
  const long before = watch.checks();
  ASSERT_TRUE(eventually([&] { return watch.checks() >= before + 10; }));
  EXPECT_EQ(watch.count(), 3) << "a failing lookup keeps the count";
  peers = 4;
  failing = false;
  ASSERT_TRUE(eventually([&] { return watch.count() == 4; }));
  const std::string text = log.text();
  std::size_t warnings = 0;
  for (auto at = text.find("cannot resolve 'p'"); at != std::string::npos; at = text.find("cannot resolve 'p'", at + 1)) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 1u) << text;
  EXPECT_NE(text.find("REDWOOD_PEERS='p': cannot resolve 'p': Temporary failure in name resolution; keeping 3 worker(s)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("REDWOOD_PEERS='p': counted 4 worker(s) again"), std::string::npos) << text;
}

// --- A run that re-shards ---

// 40 endless synthetic streams, paced so that a run goes on until it is stopped.
const std::string kForty =
    "version: 1\nname: p\nservice: {status_interval_s: 0.02}\nsources:\n"
    "  - {name: cam, type: synthetic, width: 16, height: 16, frames: 0, fps: 50}\n";

std::set<std::string> owned_by(int worker, int count) {
  std::set<std::string> out;
  for (int i = 1; i <= 40; ++i) {
    const std::string name = "cam-" + std::to_string(i);
    if (owner_of(name, count) == worker) out.insert(name);
  }
  return out;
}

TEST(PeerReshard, AWorkerFollowsTheCountTwoToThreeToTwo) {
  constexpr int kWorker = 1;
  std::atomic<int> peers{2};
  std::mutex mutex;  // guards what the hooks record
  std::vector<std::set<std::string>> built;     // each run's streams
  std::vector<std::pair<int, int>> changes;     // from -> to
  std::vector<PipelineStats> stopped;           // the runs stopped for a new count
  std::atomic<std::int64_t> delivered{0};       // in the current run, as its statuses say
  std::atomic<std::int64_t> status_changes{-1};

  ReshardOptions r;
  r.peers = [&peers] { return peers.load(); };
  r.interval_s = 0.01;
  r.on_built = [&](Pipeline& p) {
    std::lock_guard lock(mutex);
    const auto names = p.stream_names();
    built.emplace_back(names.begin(), names.end());
    delivered = 0;
  };
  r.on_reshard = [&](const PipelineStats& s, int from, int to) {
    std::lock_guard lock(mutex);
    changes.emplace_back(from, to);
    stopped.push_back(s);
  };
  std::atomic<bool> stop{false};
  RunOptions run;
  run.stop = &stop;
  run.on_status = [&](const PipelineStats& s) {
    std::int64_t n = 0;
    for (const auto& st : s.streams) n += st.delivered;
    delivered = n;
    status_changes = s.shard ? s.shard->changes : -2;
  };
  auto result = std::async(std::launch::async, [&] {
    return run_following_peers(testing::pipeline_text(kForty), PipelineOptions{.streams = 40, .shard = ShardSpec{kWorker, 2}},
                               r, run);
  });
  const auto runs = [&] {
    std::lock_guard lock(mutex);
    return built.size();
  };
  // Each step: the current run delivers frames, then the count changes and a new run starts.
  ASSERT_TRUE(eventually([&] { return runs() == 1 && delivered > 0; }));
  peers = 3;
  ASSERT_TRUE(eventually([&] { return runs() == 2 && delivered > 0; }));
  EXPECT_EQ(status_changes.load(), 1) << "every status carries the re-shards so far";
  peers = 2;
  ASSERT_TRUE(eventually([&] { return runs() == 3 && delivered > 0; }));
  stop = true;
  ASSERT_EQ(result.wait_for(10s), std::future_status::ready);
  const PipelineStats last = result.get();

  ASSERT_EQ(built.size(), 3u);
  EXPECT_EQ(changes, (std::vector<std::pair<int, int>>{{2, 3}, {3, 2}}));
  // Each run ran exactly the streams hashing gives worker 1 of that run's count.
  EXPECT_EQ(built[0], owned_by(kWorker, 2));
  EXPECT_EQ(built[1], owned_by(kWorker, 3));
  EXPECT_EQ(built[2], owned_by(kWorker, 2));
  // 2 -> 3: worker 1 keeps what it still wins and loses the rest, all to the new worker 2; it
  // gains nothing. 3 -> 2: it gets those back.
  std::set<std::string> lost;
  for (const auto& name : built[0]) {
    if (!built[1].count(name)) lost.insert(name);
  }
  for (const auto& name : built[1]) EXPECT_TRUE(built[0].count(name)) << name << " was gained going 2 -> 3";
  EXPECT_FALSE(lost.empty());
  for (const auto& name : lost) EXPECT_EQ(owner_of(name, 3), 2) << name;
  for (const auto& name : built[1]) EXPECT_EQ(owner_of(name, 3), kWorker) << name;
  std::printf("reshard: worker 1 ran %zu of 40 streams with 2 workers, %zu with 3 (lost %zu to worker 2), %zu with 2 again\n",
              built[0].size(), built[1].size(), lost.size(), built[2].size());

  // The stopped runs: stopped as SIGTERM stops a run (every stream delivered what it read; none
  // failed), with what they owned and the count they ran with.
  ASSERT_EQ(stopped.size(), 2u);
  EXPECT_EQ(stopped[0].shard->count, 2);
  EXPECT_EQ(stopped[0].shard->changes, 1);
  EXPECT_EQ(stopped[1].shard->count, 3);
  EXPECT_EQ(stopped[1].shard->changes, 2);
  for (const PipelineStats& s : stopped) {
    ASSERT_EQ(s.streams.size(), static_cast<std::size_t>(s.shard->owned.size()));
    for (const auto& st : s.streams) {
      EXPECT_GT(st.delivered, 0) << st.name;
      EXPECT_EQ(st.delivered + st.dropped, st.read) << st.name << ": frames in flight drained";
    }
  }
  EXPECT_EQ(last.shard->index, kWorker);
  EXPECT_EQ(last.shard->count, 2);
  EXPECT_EQ(last.shard->changes, 2);
  EXPECT_EQ(std::set<std::string>(last.shard->owned.begin(), last.shard->owned.end()), owned_by(kWorker, 2));
}

TEST(PeerReshard, ACountSeenOnceDoesNotReshard) {
  // The checks see 2, 2, 3 (once), then 2 again: no re-shard; the run goes on until stopped.
  std::atomic<int> checks{0};
  std::atomic<int> runs{0};
  ReshardOptions r;
  r.peers = [&checks] { return ++checks == 3 ? 3 : 2; };
  r.interval_s = 0.005;
  r.on_built = [&](Pipeline&) { ++runs; };
  std::atomic<bool> stop{false};
  RunOptions run;
  run.stop = &stop;
  auto result = std::async(std::launch::async, [&] {
    return run_following_peers(testing::pipeline_text(kForty), PipelineOptions{.streams = 40, .shard = ShardSpec{0, 2}},
                               r, run);
  });
  ASSERT_TRUE(eventually([&] { return checks > 20; }));
  stop = true;
  ASSERT_EQ(result.wait_for(10s), std::future_status::ready);
  const PipelineStats stats = result.get();
  EXPECT_EQ(runs.load(), 1);
  EXPECT_EQ(stats.shard->changes, 0);
  EXPECT_EQ(stats.shard->count, 2);
}

}  // namespace
}  // namespace redwood
