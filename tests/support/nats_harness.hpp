#pragma once
// Tests against a real nats-server: the server started on a free loopback port with JetStream
// and its own store folder, and a reader of every message a JetStream stream holds. Used by the
// NATS sink's tests and the cluster test; include only where <nats/nats.h> exists.

#include <gtest/gtest.h>
#include <nats/nats.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace redwood::testing {

inline std::string nats_server_path() {
  for (const char* p : {"/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"}) {
    if (access(p, X_OK) == 0) return p;
  }
  return "";
}

inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

inline bool port_open(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool open = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return open;
}

// nats-server -js on 127.0.0.1:port storing in dir; stopped (SIGTERM, then waited for) on stop().
class NatsServer {
 public:
  NatsServer(int port, std::filesystem::path dir) : port_(port), dir_(std::move(dir)) {}
  ~NatsServer() { stop(); }
  void start() {
    const std::string binary = nats_server_path(), port = std::to_string(port_), store = dir_.string();
    pid_ = fork();
    if (pid_ == 0) {
      execl(binary.c_str(), binary.c_str(), "-js", "-a", "127.0.0.1", "-p", port.c_str(), "-sd", store.c_str(), "-l",
            (store + "/server.log").c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 500 && !port_open(port_); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_TRUE(port_open(port_)) << "nats-server did not listen on " << port_;
  }
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }
  std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }

 private:
  int port_;
  std::filesystem::path dir_;
  pid_t pid_ = -1;
};

struct Received {
  std::string subject, id;
  nlohmann::json message;
};

// Every message of the JetStream stream, in stream order, through a pull consumer.
inline std::vector<Received> read_stream(const std::string& url, const std::string& stream, std::size_t expect,
                                         const std::string& subjects = "redwood.>") {
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  natsSubscription* sub = nullptr;
  std::vector<Received> out;
  EXPECT_EQ(natsConnection_ConnectTo(&nc, url.c_str()), NATS_OK);
  EXPECT_EQ(natsConnection_JetStream(&js, nc, nullptr), NATS_OK);
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = stream.c_str();
  jsErrCode code{};
  EXPECT_EQ(js_PullSubscribe(&sub, js, subjects.c_str(), "reader", nullptr, &so, &code), NATS_OK) << nats_GetLastError(nullptr);
  for (int empty = 0; sub != nullptr && empty < 2 && out.size() < expect + 10;) {
    natsMsgList list{};
    if (natsSubscription_Fetch(&list, sub, 500, 300, &code) != NATS_OK) {
      ++empty;
      continue;
    }
    for (int i = 0; i < list.Count; ++i) {
      natsMsg* m = list.Msgs[i];
      Received r;
      r.subject = natsMsg_GetSubject(m);
      const char* id = nullptr;
      if (natsMsgHeader_Get(m, "Nats-Msg-Id", &id) == NATS_OK) r.id = id;
      r.message = nlohmann::json::parse(std::string(natsMsg_GetData(m), natsMsg_GetDataLength(m)));
      natsMsg_Ack(m, nullptr);
      out.push_back(std::move(r));
    }
    natsMsgList_Destroy(&list);
  }
  if (sub != nullptr) natsSubscription_Destroy(sub);
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
  return out;
}

// The messages a JetStream stream holds per subject, through one stream-info request (so that
// the counts are one moment's), on a connection kept for repeated polls. A stream not created
// yet holds nothing.
class StreamCounts {
 public:
  struct Snapshot {
    std::map<std::string, std::uint64_t> per_subject;
    std::uint64_t total = 0;  // every subject's, = the stream's last sequence while nothing is deleted
  };
  StreamCounts(const std::string& url, std::string stream) : stream_(std::move(stream)) {
    EXPECT_EQ(natsConnection_ConnectTo(&nc_, url.c_str()), NATS_OK);
    if (nc_ != nullptr) {
      EXPECT_EQ(natsConnection_JetStream(&js_, nc_, nullptr), NATS_OK);
    }
  }
  ~StreamCounts() {
    if (js_ != nullptr) jsCtx_Destroy(js_);
    if (nc_ != nullptr) natsConnection_Destroy(nc_);
  }
  StreamCounts(const StreamCounts&) = delete;
  StreamCounts& operator=(const StreamCounts&) = delete;

  Snapshot operator()(const std::string& filter = ">") const {
    Snapshot out;
    if (js_ == nullptr) return out;
    jsOptions o;
    jsOptions_Init(&o);
    o.Stream.Info.SubjectsFilter = filter.c_str();
    jsStreamInfo* si = nullptr;
    jsErrCode code{};
    if (js_GetStreamInfo(&si, js_, stream_.c_str(), &o, &code) != NATS_OK) return out;
    out.total = si->State.Msgs;
    if (si->State.Subjects != nullptr) {
      for (int i = 0; i < si->State.Subjects->Count; ++i) {
        out.per_subject[si->State.Subjects->List[i].Subject] = si->State.Subjects->List[i].Msgs;
      }
    }
    jsStreamInfo_Destroy(si);
    return out;
  }

 private:
  std::string stream_;
  natsConnection* nc_ = nullptr;
  jsCtx* js_ = nullptr;
};

// Creates JetStream stream `name` on `subjects` in file storage, as an operator provisions it
// before the workers start (`nats stream add`).
inline void create_stream(const std::string& url, const std::string& name, const std::string& subjects = "redwood.>") {
  natsConnection* nc = nullptr;
  jsCtx* js = nullptr;
  ASSERT_EQ(natsConnection_ConnectTo(&nc, url.c_str()), NATS_OK);
  ASSERT_EQ(natsConnection_JetStream(&js, nc, nullptr), NATS_OK);
  jsStreamConfig config;
  jsStreamConfig_Init(&config);
  config.Name = name.c_str();
  const char* list[] = {subjects.c_str()};
  config.Subjects = list;
  config.SubjectsLen = 1;
  config.Storage = js_FileStorage;
  jsStreamInfo* info = nullptr;
  jsErrCode code{};
  EXPECT_EQ(js_AddStream(&info, js, &config, nullptr, &code), NATS_OK) << nats_GetLastError(nullptr);
  if (info != nullptr) jsStreamInfo_Destroy(info);
  jsCtx_Destroy(js);
  natsConnection_Destroy(nc);
}

}  // namespace redwood::testing
