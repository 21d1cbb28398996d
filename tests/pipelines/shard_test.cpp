// Sharding without a coordinator (issue 23): rendezvous hashing (every stream one owner, balance,
// the streams N -> N+1 moves, known answers that catch a change of the hash), --shard and its
// StatefulSet form, source entries that list their streams in a file, and sharded runs: three
// workers cover every stream once, a worker owning nothing idles until stopped, the summary and
// the metrics say what a worker owns.

#include "pipelines/metrics.hpp"
#include "pipelines/pipeline.hpp"
#include "pipelines/pipeline_text.hpp"
#include "pipelines/shard.hpp"
#include "support/onnx_builder.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <thread>

namespace redwood {
namespace {

std::string id(int i) { return "cam-" + std::to_string(i); }

TEST(ShardHash, EveryStreamHasExactlyOneOwnerTheHighestWeight) {
  for (int n = 1; n <= 9; ++n) {
    for (int i = 0; i < 500; ++i) {
      const int owner = owner_of(id(i), n);
      ASSERT_GE(owner, 0);
      ASSERT_LT(owner, n);
      int owners = 0;
      for (int k = 0; k < n; ++k) {
        owners += owns(ShardSpec{k, n}, id(i));
        if (k != owner) {
          EXPECT_LT(shard_weight(id(i), k), shard_weight(id(i), owner));
        }
      }
      EXPECT_EQ(owners, 1) << id(i) << " of " << n;
    }
  }
}

TEST(ShardHash, TenThousandStreamsSpreadEvenlyOverEightWorkers) {
  std::vector<int> count(8, 0);
  for (int i = 0; i < 10000; ++i) ++count[static_cast<std::size_t>(owner_of(id(i), 8))];
  std::printf("shard: 10,000 streams over 8 workers:");
  for (int c : count) std::printf(" %d", c);
  std::printf(" (1,250 each ideally)\n");
  for (int k = 0; k < 8; ++k) {
    // 1,250 each; a binomial's standard deviation here is 33 (2.6 %): within 7 %.
    EXPECT_NEAR(count[static_cast<std::size_t>(k)], 1250, 88) << "worker " << k;
  }
}

TEST(ShardHash, AddingAWorkerMovesAboutItsShareAndOnlyOntoIt) {
  for (int n = 2; n <= 9; ++n) {
    int moved = 0;
    for (int i = 0; i < 10000; ++i) {
      const int before = owner_of(id(i), n), after = owner_of(id(i), n + 1);
      if (before == after) continue;
      ++moved;
      EXPECT_EQ(after, n) << id(i) << " moved from " << before << " to " << after << " going " << n << " -> " << n + 1;
    }
    const double fraction = moved / 10000.0, ideal = 1.0 / (n + 1);
    std::printf("shard: %d -> %d workers moves %.4f of 10,000 streams (ideal %.4f)\n", n, n + 1, fraction, ideal);
    EXPECT_NEAR(fraction, ideal, 0.015) << n << " -> " << n + 1;
  }
}

TEST(ShardHash, KnownAnswers) {
  // Fixed values: a change of the hash (which would reshuffle every deployment's streams when
  // workers of two versions meet) fails here.
  // (Computed independently too, by a Python transcription of FNV-1a and murmur3's fmix64.)
  EXPECT_EQ(shard_weight("", 0), 5562976019076949127ULL);
  EXPECT_EQ(shard_weight("cam-1", 0), 0xf4a69fe280a6bf26ULL);
  EXPECT_EQ(shard_weight("cam-1", 1), 0x69d6eb5ee2ab029fULL);
  const std::map<std::string, std::vector<int>> owners{
      // stream -> its owner among 2, 3, 5 and 8 workers
      {"cam-1", {0, 0, 0, 0}},
      {"cam-2", {1, 1, 1, 1}},
      {"lobby", {1, 1, 4, 7}},
      {"rtsp://10.0.0.7/stream1", {0, 2, 4, 6}},
      {"redwood", {1, 2, 3, 3}},
  };
  for (const auto& [stream, expected] : owners) {
    EXPECT_EQ((std::vector<int>{owner_of(stream, 2), owner_of(stream, 3), owner_of(stream, 5), owner_of(stream, 8)}), expected)
        << stream;
  }
}

TEST(ShardSpec, ParsesOrdinalOfCount) {
  const ShardSpec s = parse_shard("1/3");
  EXPECT_EQ(s.index, 1);
  EXPECT_EQ(s.count, 3);
  EXPECT_EQ(parse_shard("0/1").count, 1);
  EXPECT_NE(testing::message_of<InvalidArgument>([] { parse_shard("3/3"); })
                .find("--shard 3/3: the ordinal must be below the count"),
            std::string::npos);
  for (const char* bad : {"", "1", "1/", "/3", "a/3", "1/b", "-1/3", "1/0", "1/3x", "1/3/4", " 1/3", "1/99999999999"}) {
    const std::string e = testing::message_of<InvalidArgument>([&] { parse_shard(bad); });
    EXPECT_NE(e.find(std::string("--shard ") + bad + ": expected I/N"), std::string::npos) << bad << ": " << e;
  }
}

TEST(ShardSpec, StatefulSetOrdinalFromThePodNameCountFromReplicas) {
  const ShardSpec s = shard_from_statefulset("redwood-2", nullptr, "3");
  EXPECT_EQ(s.index, 2);
  EXPECT_EQ(s.count, 3);
  EXPECT_EQ(shard_from_statefulset("my-video-app-10", "ignored-0", "12").index, 10);  // the last dash
  EXPECT_EQ(shard_from_statefulset(nullptr, "redwood-1", "2").index, 1);             // HOSTNAME
  EXPECT_EQ(shard_from_statefulset("", "redwood-1", "2").index, 1);
  const auto error = [](const char* pod, const char* host, const char* replicas) {
    return testing::message_of<InvalidArgument>([&] { shard_from_statefulset(pod, host, replicas); });
  };
  EXPECT_NE(error(nullptr, nullptr, "3").find("neither POD_NAME nor HOSTNAME is set"), std::string::npos);
  EXPECT_NE(error("redwood", nullptr, "3").find("POD_NAME='redwood' does not end in -<ordinal>"), std::string::npos);
  EXPECT_NE(error(nullptr, "redwood-x", "3").find("HOSTNAME='redwood-x' does not end in -<ordinal>"), std::string::npos);
  // (REDWOOD_PEERS, the count found at run time: peer_count_test.cpp.)
  EXPECT_NE(error("redwood-1", nullptr, nullptr).find("neither REDWOOD_REPLICAS (a fixed worker count) nor REDWOOD_PEERS"),
            std::string::npos);
  EXPECT_NE(error("redwood-1", nullptr, "three").find("REDWOOD_REPLICAS='three' is not a count"), std::string::npos);
  EXPECT_NE(error("redwood-1", nullptr, "0").find("REDWOOD_REPLICAS='0' is not a count"), std::string::npos);
  EXPECT_NE(error("redwood-3", nullptr, "3").find("the ordinal must be below the count"), std::string::npos);
}

// --- Source lists ---

std::filesystem::path list_dir() {
  static const auto dir = testing::temp_dir("shard-lists");
  return dir;
}

std::string write_list(const std::string& name, const std::string& text) {
  const auto path = list_dir() / name;
  std::ofstream(path) << text;
  return path.string();
}

using testing::load_error;  // the ConfigError's message ("" when none)

TEST(ShardSourceList, VideoSourcesFromAListFile) {
  const auto video = testing::assets_dir() / "video" / "vtest.avi";
  if (!std::filesystem::exists(video)) GTEST_SKIP() << video << " is missing (scripts/setup.sh fetches it)";
  // A relative path is relative to the list file's folder.
  std::filesystem::remove(list_dir() / "clip.avi");
  std::filesystem::create_symlink(video, list_dir() / "clip.avi");
  const std::string list = write_list("clips.txt", "# the lobby cameras\n"
                                                   "\n"
                                                   "door " + video.string() + "\n"
                                                   "   " + video.string() + "   \n"
                                                   "hall clip.avi\n");
  Pipeline p(testing::pipeline_text("version: 1\nsources:\n  - {name: lobby, type: video, list: " + list +
                                    ", start_frame: 0}\n  - {name: solo, type: synthetic, frames: 2}\n"));
  EXPECT_EQ(p.stream_names(), (std::vector<std::string>{"door", "lobby-4", "hall", "solo"}));
  const PipelineStats stats = p.run(RunOptions{.max_frames = 2, .stop = nullptr, .on_status = {}});
  ASSERT_EQ(stats.streams.size(), 4u);
  for (const auto& s : stats.streams) EXPECT_EQ(s.delivered, 2) << s.name;
}

TEST(ShardSourceList, MistakesNameTheListFileAndLine) {
  const std::string dup = write_list("dup.txt", "a synthetic\nb\na\n");
  std::string e = load_error("version: 1\nsources:\n  - {name: s, type: synthetic, list: " + dup + "}\n");
  EXPECT_NE(e.find(dup + ":1: source 's': expected a NAME alone"), std::string::npos) << e;
  const std::string twice = write_list("twice.txt", "a\nb\n\na\n");
  e = load_error("version: 1\nsources:\n  - {name: s, type: synthetic, list: " + twice + "}\n");
  EXPECT_NE(e.find(twice + ":4: source 's': a second stream named 'a' (the first is at line 1)"), std::string::npos) << e;
  // A listed name that another entry has.
  const std::string ab = write_list("ab.txt", "b\na\n");
  e = load_error("version: 1\nsources:\n  - {name: a, type: synthetic}\n  - {name: s, type: synthetic, list: " + ab + "}\n");
  const std::string first = testing::where(3, 5);
  EXPECT_NE(e.find(ab + ":2: a second source named 'a' (the first: " + first.substr(0, first.size() - 1) + ")"), std::string::npos) << e;
  const std::string three = write_list("three.txt", "rtsp://h/1\nx rtsp://h/2 extra\n");
  e = load_error("version: 1\nsources:\n  - {name: c, type: stream, list: " + three + "}\n");
  EXPECT_NE(e.find(three + ":2: source 'c': expected 'NAME URL' or 'URL', got 3 fields"), std::string::npos) << e;
  const std::string missing = write_list("missing.txt", "ok-name /nowhere/at/all.avi\n");
  e = load_error("version: 1\nsources:\n  - {name: v, type: video, list: " + missing + "}\n");
  EXPECT_NE(e.find(missing + ":1: source 'ok-name': path: no such file '/nowhere/at/all.avi'"), std::string::npos) << e;
  const std::string not_url = write_list("noturl.txt", "cam1 rtsp://h/1\ncam2 h/2\n");
  e = load_error("version: 1\nsources:\n  - {name: c, type: stream, list: " + not_url + "}\n");
  EXPECT_NE(e.find(not_url + ":2: source 'cam2': url: expected a URL"), std::string::npos) << e;
  // A key of the entry that the source refuses names its place in the pipeline file.
  e = load_error("version: 1\nsources:\n  - {name: c, type: stream, list: " + not_url + ", max_reconnects: -1}\n");
  EXPECT_NE(e.find(testing::where(3, 5).substr(0, testing::where(3, 5).size() - 3)), std::string::npos) << e;
  EXPECT_NE(e.find("max_reconnects: must be >= 0"), std::string::npos) << e;
  e = load_error("version: 1\nsources:\n  - {name: c, type: stream, list: " + not_url + ", url: rtsp://x/y}\n");
  EXPECT_NE(e.find("give either 'url' or 'list'"), std::string::npos) << e;
  e = load_error("version: 1\nsources:\n  - {name: c, type: stream, list: no-such-list.txt}\n");
  EXPECT_NE(e.find("list: no such file 'no-such-list.txt'"), std::string::npos) << e;
  e = load_error("version: 1\nsources:\n  - {name: c, type: test_slow_start, list: " + ab + "}\n");  // streams_test's
  EXPECT_NE(e.find("a source of type 'test_slow_start' takes no list"), std::string::npos) << e;
  const std::string empty = write_list("empty.txt", "# nothing yet\n\n");
  e = load_error("version: 1\nsources:\n  - {name: c, type: stream, list: " + empty + "}\n");
  EXPECT_NE(e.find("lists no stream"), std::string::npos) << e;
}

// --- Sharded runs ---

const std::string kTwelve =
    "version: 1\nname: p\nservice: {status_interval_s: 0.05}\nsources:\n"
    "  - {name: lobby, type: synthetic, width: 16, height: 16, frames: 3}\n"
    "  - {name: gate, type: synthetic, width: 16, height: 16, frames: 3}\n"
    "  - {name: yard, type: synthetic, width: 16, height: 16, frames: 3}\n"
    "  - {name: dock, type: synthetic, width: 16, height: 16, frames: 3}\n";

TEST(ShardPipeline, ThreeWorkersCoverEveryStreamExactlyOnce) {
  // 4 sources x 3 copies = 12 streams (lobby-1 ... dock-3).
  std::map<std::string, int> runs;
  for (int k = 0; k < 3; ++k) {
    Pipeline p(testing::pipeline_text(kTwelve), PipelineOptions{.streams = 3, .shard = ShardSpec{k, 3}});
    const PipelineStats stats = p.run();
    ASSERT_TRUE(stats.shard.has_value());
    EXPECT_EQ(stats.shard->index, k);
    EXPECT_EQ(stats.shard->count, 3);
    EXPECT_EQ(stats.shard->streams_total, 12);
    EXPECT_EQ(stats.shard->owned, p.stream_names());
    ASSERT_EQ(stats.streams.size(), stats.shard->owned.size());
    for (const auto& s : stats.streams) {
      EXPECT_EQ(s.delivered, 3) << s.name;
      EXPECT_EQ(owner_of(s.name, 3), k) << s.name;
      ++runs[s.name];
    }
    std::printf("shard %d/3 ran %zu stream(s)\n", k, stats.streams.size());
  }
  ASSERT_EQ(runs.size(), 12u);
  for (const auto& [name, n] : runs) EXPECT_EQ(n, 1) << name;
  // Without --shard: all twelve, and no shard in the statistics.
  Pipeline all(testing::pipeline_text(kTwelve), PipelineOptions{.streams = 3});
  EXPECT_EQ(all.stream_names().size(), 12u);
  EXPECT_FALSE(all.shard().has_value());
}

TEST(ShardPipeline, SummaryAndMetricsSayWhatTheWorkerOwns) {
  Pipeline p(testing::pipeline_text(kTwelve), PipelineOptions{.streams = 3, .shard = ShardSpec{1, 3}});
  const PipelineStats stats = p.run();
  const auto& owned = stats.shard->owned;
  std::string names;
  for (const auto& n : owned) names += (names.empty() ? "" : ", ") + n;
  const std::string line = "shard 1/3: " + std::to_string(owned.size()) + " of 12 stream(s): " + names;
  EXPECT_EQ(shard_line(*stats.shard), line);
  EXPECT_NE(summary_text(stats).find("  " + line + "\n"), std::string::npos) << summary_text(stats);
  const std::string metrics = prometheus_text("p", stats, {});
  EXPECT_NE(metrics.find("redwood_shard_info{pipeline=\"p\",shard=\"1\",shards=\"3\"} 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("redwood_shard_streams{pipeline=\"p\"} " + std::to_string(owned.size()) + "\n"), std::string::npos);
  EXPECT_NE(metrics.find("redwood_shard_streams_total{pipeline=\"p\"} 12\n"), std::string::npos);
  // Past twenty names the line stops listing them.
  ShardStats many{0, 2, 50, {}};
  for (int i = 0; i < 25; ++i) many.owned.push_back(id(i));
  EXPECT_NE(shard_line(many).find("cam-19 and 5 more"), std::string::npos) << shard_line(many);
  // Not sharded: no shard line, no shard metrics.
  Pipeline plain(testing::pipeline_text(kTwelve));
  const PipelineStats plain_stats = plain.run();
  EXPECT_EQ(summary_text(plain_stats).find("shard"), std::string::npos);
  EXPECT_EQ(prometheus_text("p", plain_stats, {}).find("redwood_shard"), std::string::npos);
}

TEST(ShardPipeline, AWorkerOwningNothingIdlesUntilStopped) {
  // One stream, two workers: the one hashing does not give it to stays up.
  const int idle = 1 - owner_of("lobby", 2);
  Pipeline p(testing::pipeline_text("version: 1\nname: p\nservice: {status_interval_s: 0.05}\nsources:\n"
                                    "  - {name: lobby, type: synthetic, frames: 3}\n"),
             PipelineOptions{.shard = ShardSpec{idle, 2}});
  EXPECT_TRUE(p.stream_names().empty());
  std::atomic<bool> stop{false};
  std::atomic<int> statuses{0};
  RunOptions options;
  options.stop = &stop;
  options.on_status = [&](const PipelineStats& s) {
    EXPECT_TRUE(s.shard && s.shard->owned.empty());
    ++statuses;
  };
  auto run = std::async(std::launch::async, [&] { return p.run(options); });
  // Still running after 300 ms (it would have ended at once without the idle path).
  EXPECT_EQ(run.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  const auto stopped = std::chrono::steady_clock::now();
  stop = true;
  ASSERT_EQ(run.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_LT(std::chrono::steady_clock::now() - stopped, std::chrono::milliseconds(500));
  const PipelineStats stats = run.get();
  EXPECT_TRUE(stats.streams.empty());
  EXPECT_GE(statuses.load(), 2);  // the metrics endpoint keeps being fed
  EXPECT_EQ(shard_line(*stats.shard), "shard " + std::to_string(idle) + "/2: 0 of 1 stream(s) (idle)");
}

TEST(ShardPipeline, ListedSyntheticStreamsAreShardedByTheirNames) {
  std::string text;
  for (int i = 0; i < 30; ++i) text += id(i) + "\n";
  const std::string list = write_list("thirty.txt", text);
  const std::string yaml = "version: 1\nsources:\n  - {name: cams, type: synthetic, frames: 1, width: 8, height: 8, list: " + list + "}\n";
  std::set<std::string> seen;
  for (int k = 0; k < 4; ++k) {
    Pipeline p(testing::pipeline_text(yaml), PipelineOptions{.shard = ShardSpec{k, 4}});
    EXPECT_EQ(p.shard()->streams_total, 30);
    for (const auto& name : p.stream_names()) {
      EXPECT_EQ(owner_of(name, 4), k);
      EXPECT_TRUE(seen.insert(name).second) << name;
    }
  }
  EXPECT_EQ(seen.size(), 30u);
}

// --- The launcher ---

TEST(ShardLauncher, ShardOptionAndItsErrors) {
  const auto config = list_dir() / "twelve.yaml";
  std::ofstream(config) << kTwelve;
  // (The forms and their messages: ShardSpec above. Each launch costs about a second here.)
  auto r = testing::run_command("POD_NAME=redwood-2 REDWOOD_REPLICAS=3 " + std::string(REDWOOD_BINARY) + " run " +
                           config.string() + " --streams 3 --shard statefulset --quiet 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  int owned = 0;
  for (int i = 0; i < 12; ++i) {
    const char* base[] = {"lobby", "gate", "yard", "dock"};
    owned += owner_of(std::string(base[i / 3]) + "-" + std::to_string(i % 3 + 1), 3) == 2;
  }
  EXPECT_NE(r.output.find("shard 2/3: " + std::to_string(owned) + " of 12 stream(s)"), std::string::npos) << r.output;
  const auto statefulset = [&config](const std::string& env) {
    return testing::run_command("env -u REDWOOD_REPLICAS -u REDWOOD_PEERS -u REDWOOD_PEERS_INTERVAL " + env + " " +
                                std::string(REDWOOD_BINARY) + " run " + config.string() +
                                " --streams 3 --shard statefulset --quiet 2>&1");
  };
  r = statefulset("POD_NAME=redwood-2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("neither REDWOOD_REPLICAS (a fixed worker count) nor REDWOOD_PEERS"), std::string::npos)
      << r.output;
  // The count from the lookup: '127.0.0.1' is one address (numeric: no /etc/hosts or DNS needed),
  // and ordinal 2 counts itself: 3.
  r = statefulset("POD_NAME=redwood-2 REDWOOD_PEERS=127.0.0.1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("shard count from REDWOOD_PEERS='127.0.0.1': 3 worker(s), counted every 10 s"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("shard 2/3: " + std::to_string(owned) + " of 12 stream(s)"), std::string::npos) << r.output;
  r = statefulset("POD_NAME=redwood-0 REDWOOD_PEERS=redwood-no-such-service.invalid REDWOOD_PEERS_INTERVAL=0.1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("redwood: error: --shard statefulset: REDWOOD_PEERS='redwood-no-such-service.invalid': cannot "
                          "resolve 'redwood-no-such-service.invalid': "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("(retried for 0.3 s: 3 x REDWOOD_PEERS_INTERVAL)"), std::string::npos) << r.output;
  r = statefulset("POD_NAME=redwood-0 REDWOOD_PEERS=127.0.0.1 REDWOOD_PEERS_INTERVAL=0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("REDWOOD_PEERS_INTERVAL='0' is not a number of seconds from 0.1 to 3600"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace redwood
