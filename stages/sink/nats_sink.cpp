// nats sink: the frame_json message of every frame published into a NATS JetStream stream, so
// that consumers (and other shards' sinks) share one durable, replayable log.
//
//   - name: js
//     type: nats
//     url: nats://127.0.0.1:4222        # or a comma-separated list; nats:// or tls://
//     subject: redwood.{pipeline}.{stream}
//     stream: redwood                   # the JetStream stream; created when absent (create_stream)
//     max_pending: 256                  # messages published and awaiting the server's ack
//     buffer: 10000                     # most messages held (in flight + waiting); beyond, dropped
//     retry: {initial_ms: 100, max_ms: 5000}
//     resume: true                      # replayable streams start after what the stream holds
//
// write() only serializes the message into a bounded queue (a full queue drops and counts): the
// pipeline's delivery thread never waits on the network. A thread of the sink's own publishes
// the queue in batches of at most max_pending with js_PublishMsgAsync and waits for the batch's
// acks (js_PublishAsyncComplete, bounded by ack_timeout_ms). A message counts as written when
// JetStream acknowledged it.
//
// Order. A failed batch is retried from its first unacknowledged message, everything after it
// included (go-back-N), after a backoff: the server processes one connection's messages in
// order, so what it stored of a batch is a prefix, and resending the rest in order keeps each
// stream's order; messages of that rest that were in fact stored (their ack lost) come back as
// duplicates, which JetStream drops by their `Nats-Msg-Id: <pipeline>/<stream>/<seq>` header
// within its duplicate window. Nothing is published while the connection is down, and the
// client's reconnect buffer is one byte, so a publish during an outage fails at once instead of
// being replayed after messages the server lost.
//
// Message ids. A replayable source (a file, a synthetic pattern) gives the same frame the same
// seq in every run, so its id is `<pipeline>/<stream>/<seq>`. A live source's frames are new in
// every run, so its ids carry the run (`<pipeline>/<stream>/<seq>@<run>`, the run being the
// sink's start in Unix ms): a restarted camera's frames are never taken for the last run's.
//
// Resume. Before the run starts, the pipeline asks where each replayable stream should begin
// (resume_at): the seq after the last message of the stream's subject that JetStream holds, read
// with one "last message for subject" request per stream. A worker restarted after a crash, or
// the worker that takes a stream over after a re-shard, thus goes on from the last frame
// JetStream acknowledged instead of sending it all again (which the duplicate window, two minutes
// by default, would only partly catch). It needs a subject per stream (`{stream}` in the
// subject); `resume: false` sends every frame again.
//
// Close waits at most flush_timeout_ms (plus one ack_timeout_ms) for the queue to drain; what is
// still unacknowledged then counts as failed and is logged (the run itself does not fail: the
// counts say what reached the server).
//
// Callbacks. The client calls back on its own threads: the connection's events (disconnected,
// reconnected, closed) on one thread it shares among all connections, in the order they
// happened, and JetStream's acks on the subscription's. Closing may leave a disconnected and a
// closed callback queued there, to run after the sink is gone, so the connection's callbacks
// reach the sink through a Link that close detaches; the closed callback, the last one a
// connection gets, frees the link once it is detached. Acks are settled before the JetStream
// context goes: what is still pending is taken back from the client (its handler never runs)
// and a handler already running is waited for.

#include "core/log.hpp"
#include "core/thread_name.hpp"
#include "stages/sink/frame_json.hpp"
#include "stages/sink/sink.hpp"

#include <fmt/format.h>
#include <nats/nats.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

namespace redwood {
namespace {

using Clock = std::chrono::steady_clock;

// NATS subjects are dot-separated tokens; whitespace, '*' and '>' are not allowed in a token. A
// name is escaped as %XX for those and for '.' and '%' (so that distinct names stay distinct).
std::string subject_token(const std::string& name) {
  std::string out;
  for (const unsigned char c : name) {
    if (c <= ' ' || c == '.' || c == '*' || c == '>' || c == '%' || c == 0x7f) {
      out += fmt::format("%{:02X}", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out.empty() ? "%" : out;  // an empty name still makes a token
}

std::vector<std::string> split(const std::string& text, char by) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t at; (at = text.find(by, start)) != std::string::npos; start = at + 1) parts.push_back(text.substr(start, at - start));
  parts.push_back(text.substr(start));
  return parts;
}

// The subject template: tokens of literal text and the placeholders {pipeline} and {stream}.
// Returns the error ("" when valid).
std::string check_template(const std::string& subject) {
  if (subject.empty()) return "empty";
  const auto tokens = split(subject, '.');
  for (const auto& t : tokens) {
    if (t.empty()) return fmt::format("'{}': an empty token (a leading, trailing or double '.')", subject);
    for (const unsigned char c : t) {
      if (c <= ' ' || c == '*' || c == '>' || c == 0x7f) return fmt::format("'{}': '{}' holds a space or a wildcard", subject, t);
    }
    std::string rest = t;
    for (const char* ph : {"{pipeline}", "{stream}"}) {
      for (std::size_t at; (at = rest.find(ph)) != std::string::npos;) rest.erase(at, std::char_traits<char>::length(ph));
    }
    if (rest.find_first_of("{}") != std::string::npos) {
      return fmt::format("'{}': unknown placeholder in '{}' (known: {{pipeline}}, {{stream}})", subject, t);
    }
  }
  if (tokens[0].find('{') != std::string::npos) {
    return fmt::format("'{}': the first token must be literal text (the stream's subjects are '<first token>.>')", subject);
  }
  return "";
}

std::string fill_template(std::string subject, const std::string& pipeline, const std::string& stream) {
  for (const auto& [ph, value] : {std::pair<std::string, std::string>{"{pipeline}", subject_token(pipeline)},
                                  std::pair<std::string, std::string>{"{stream}", subject_token(stream)}}) {
    for (std::size_t at; (at = subject.find(ph)) != std::string::npos;) subject.replace(at, ph.size(), value);
  }
  return subject;
}

std::string status_text(natsStatus s) { return natsStatus_GetText(s); }

class NatsSink final : public Sink {
 public:
  explicit NatsSink(SinkArgs& a) : what_(fmt::format("sink '{}'", a.name)), pipeline_(a.pipeline) {
    Params& p = a.params;
    url_ = p.get<std::string>("url", "nats://127.0.0.1:4222");
    for (const auto& u : split(url_, ',')) {
      if (u.rfind("nats://", 0) != 0 && u.rfind("tls://", 0) != 0) {
        p.fail("url", fmt::format("'{}': expected nats://HOST:PORT or tls://HOST:PORT (a comma-separated list for a cluster)", u));
      }
      servers_.push_back(u);
    }
    const auto subject = p.get<std::string>("subject", "redwood.{pipeline}.{stream}");
    if (const auto error = check_template(subject); !error.empty()) p.fail("subject", error);
    for (const auto& s : a.stream_names) subjects_.push_back(fill_template(subject, pipeline_, s));
    stream_names_ = a.stream_names;
    stream_live_ = a.stream_live;
    subject_per_stream_ = subject.find("{stream}") != std::string::npos;
    resume_ = p.get<bool>("resume", true);
    resume_wait_ms_ = p.get<int>("resume_wait_ms", 5000);
    if (resume_wait_ms_ < 0) p.fail("resume_wait_ms", "must be at least 0");
    run_id_ = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    stream_subject_ = split(subject, '.')[0] + ".>";
    stream_ = p.get<std::string>("stream", "redwood");
    if (stream_.empty() || stream_.find_first_of(" \t\r\n.*>/\\") != std::string::npos) {
      p.fail("stream", fmt::format("'{}': a JetStream stream name cannot be empty nor hold spaces, '.', '*', '>', '/' or '\\'", stream_));
    }
    create_stream_ = p.get<bool>("create_stream", true);
    max_pending_ = p.get<int>("max_pending", 256);
    if (max_pending_ < 1) p.fail("max_pending", "must be at least 1");
    buffer_ = p.get<std::int64_t>("buffer", 10000);
    if (buffer_ < max_pending_) p.fail("buffer", fmt::format("must be at least max_pending ({})", max_pending_));
    ack_timeout_ms_ = p.get<int>("ack_timeout_ms", 2000);
    if (ack_timeout_ms_ < 1) p.fail("ack_timeout_ms", "must be at least 1");
    flush_timeout_ms_ = p.get<int>("flush_timeout_ms", 5000);
    if (flush_timeout_ms_ < 0) p.fail("flush_timeout_ms", "must be at least 0");
    if (p.node("retry")) {
      Params r(p.node("retry"), std::make_shared<ConfigOrigin>(p.origin()), what_ + ": retry");
      retry_initial_ms_ = r.get<int>("initial_ms", 100);
      retry_max_ms_ = r.get<int>("max_ms", 5000);
      if (retry_initial_ms_ < 1) r.fail("initial_ms", "must be at least 1");
      if (retry_max_ms_ < retry_initial_ms_) r.fail("max_ms", "must be at least initial_ms");
      r.finish();
    }
    connect();
    publisher_ = std::thread([this] { publish_loop(); });
  }

  ~NatsSink() override {
    stop();
    disconnect();
  }

  void write(const Frame& f, double latency_ms) override {
    Message m;
    m.subject = f.stream < static_cast<int>(subjects_.size()) ? &subjects_[f.stream] : &subjects_.front();
    const bool live = f.stream >= 0 && f.stream < static_cast<int>(stream_live_.size()) && stream_live_[f.stream];
    m.id = live ? fmt::format("{}/{}/{}@{}", pipeline_, f.stream_name, f.seq, run_id_)
                : fmt::format("{}/{}/{}", pipeline_, f.stream_name, f.seq);
    append_frame_json(m.body, f, pipeline_, latency_ms);
    {
      std::lock_guard lock(mutex_);
      if (static_cast<std::int64_t>(queue_.size()) >= buffer_) {
        ++dropped_;
        return;
      }
      queue_.push_back(std::move(m));
    }
    wake_.notify_one();
  }

  void close() override {
    stop();
    disconnect();
    if (duplicates_ > 0) {
      log().info("{}: {} of the {} message(s) acknowledged were already in JetStream stream '{}' (dropped there as duplicates)",
                 what_, duplicates_.load(), written_.load(), stream_);
    }
  }

  std::optional<std::int64_t> resume_at(std::size_t stream) override {
    if (!resume_ || stream >= subjects_.size()) return std::nullopt;
    if (!subject_per_stream_) {
      if (!resume_warned_) log().warn("{}: no resume: the streams share a subject (add {{stream}} to subject)", what_);
      resume_warned_ = true;
      return std::nullopt;
    }
    // Up to resume_wait_ms for a connection (the client retries in the background).
    const auto until = Clock::now() + std::chrono::milliseconds(resume_wait_ms_);
    while (!connected() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!connected()) {
      if (!resume_warned_) {
        log().warn("{}: no NATS server at {} within resume_wait_ms ({} ms): the streams start from their first frame "
                   "(JetStream drops the repeats it still holds within its duplicate window)",
                   what_, url_, resume_wait_ms_);
      }
      resume_warned_ = true;
      resume_wait_ms_ = 0;  // the other streams do not wait again
      return std::nullopt;
    }
    // The JetStream stream first (created when absent and allowed): a new stream holds nothing,
    // and a last-message request must not reach a stream another worker is still creating
    // (nats-server 2.9 can crash on that). The publisher thread waits meanwhile: nothing has
    // been written yet.
    if (!stream_ready_ && !(stream_ready_ = ensure_stream())) {
      log().warn("{}: stream '{}' starts from its first frame (JetStream stream '{}' not ready)", what_, stream_names_[stream],
                 stream_);
      return std::nullopt;
    }
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = ack_timeout_ms_;
    natsMsg* msg = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    const natsStatus s = js_GetLastMsg(&msg, js_, stream_.c_str(), subjects_[stream].c_str(), &jo, &code);
    if (s == NATS_NOT_FOUND) return 0;  // no such JetStream stream yet, or nothing of this stream in it
    if (s != NATS_OK) {
      log().warn("{}: cannot read the last message of '{}' in JetStream stream '{}' ({}): stream '{}' starts from its first frame",
                 what_, subjects_[stream], stream_, status_text(s), stream_names_[stream]);
      return std::nullopt;
    }
    const char* id = nullptr;
    std::optional<std::int64_t> next = 0;
    if (natsMsgHeader_Get(msg, "Nats-Msg-Id", &id) == NATS_OK) next = next_seq(id, stream);
    natsMsg_Destroy(msg);
    return next;
  }

 private:
  // The seq after the one a stored id names, for a replayable stream's id
  // ("<pipeline>/<stream>/<seq>"); 0 for another's (a live run's "...@<run>": nothing to skip).
  std::int64_t next_seq(const std::string& id, std::size_t stream) const {
    const std::string prefix = fmt::format("{}/{}/", pipeline_, stream_names_[stream]);
    if (id.rfind(prefix, 0) != 0) return 0;
    const std::string rest = id.substr(prefix.size());
    if (rest.empty() || rest.size() > 18 || rest.find_first_not_of("0123456789") != std::string::npos) return 0;
    return std::stoll(rest) + 1;
  }

  struct Message {
    const std::string* subject = nullptr;
    std::string id, body;
  };

  void connect() {
    natsOptions* opts = nullptr;
    auto check = [&](natsStatus s, const char* what) {
      if (s != NATS_OK) throw Error(fmt::format("{}: NATS client: {}: {}", what_, what, status_text(s)));
    };
    check(natsOptions_Create(&opts), "options");
    std::vector<const char*> servers;
    for (const auto& s : servers_) servers.push_back(s.c_str());
    natsStatus s = natsOptions_SetServers(opts, servers.data(), static_cast<int>(servers.size()));
    if (s == NATS_OK) s = natsOptions_SetNoRandomize(opts, true);
    if (s == NATS_OK) s = natsOptions_SetTimeout(opts, 2000);
    if (s == NATS_OK) s = natsOptions_SetMaxReconnect(opts, -1);
    // Every attempt after a failure waits initial, 2 initial, 4... up to max (the `retry` key).
    link_ = new Link;
    link_->sink = this;
    if (s == NATS_OK) s = natsOptions_SetCustomReconnectDelay(opts, &NatsSink::reconnect_delay, link_);
    if (s == NATS_OK) s = natsOptions_SetReconnectBufSize(opts, 1);  // see the order note at the top
    if (s == NATS_OK) s = natsOptions_SetRetryOnFailedConnect(opts, true, &NatsSink::on_reconnected, link_);
    if (s == NATS_OK) s = natsOptions_SetDisconnectedCB(opts, &NatsSink::on_disconnected, link_);
    if (s == NATS_OK) s = natsOptions_SetReconnectedCB(opts, &NatsSink::on_reconnected, link_);
    if (s == NATS_OK) s = natsOptions_SetClosedCB(opts, &NatsSink::on_closed, link_);
    if (s == NATS_OK) {
      s = natsConnection_Connect(&conn_, opts);
      if (s == NATS_NOT_YET_CONNECTED) {
        log().warn("{}: no NATS server at {} yet; retrying in the background (messages wait in a buffer of {})", what_, url_,
                   buffer_);
        down_since_ = Clock::now();
        s = NATS_OK;
      }
    }
    natsOptions_Destroy(opts);
    if (s != NATS_OK) disconnect();  // no connection: no callback will come
    check(s, fmt::format("connect to {}", url_).c_str());
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = ack_timeout_ms_;
    jo.PublishAsync.MaxPending = max_pending_;
    jo.PublishAsync.AckHandler = &NatsSink::on_ack;
    jo.PublishAsync.AckHandlerClosure = this;
    jo.PublishAsync.StallWait = 10;
    if (const natsStatus js = natsConnection_JetStream(&js_, conn_, &jo); js != NATS_OK) {
      disconnect();  // the constructor throws: no destructor will
      check(js, "JetStream context");
    }
  }

  // Settles the acks, closes the connection and detaches the link (see Callbacks at the top).
  void disconnect() {
    if (js_ != nullptr) {
      natsMsgList pending{};  // (the client keeps no pending list before the first publish)
      if (published_ && js_PublishAsyncGetPendingList(&pending, js_) == NATS_OK) natsMsgList_Destroy(&pending);
      jsPubOptions wait;
      jsPubOptions_Init(&wait);
      wait.MaxWait = ack_timeout_ms_;
      js_PublishAsyncComplete(js_, &wait);  // returns once no handler runs
      jsCtx_Destroy(js_);
      js_ = nullptr;
    }
    if (link_ != nullptr) {
      bool free = conn_ == nullptr;  // never connected: nothing was posted
      {
        std::lock_guard lock(link_->mutex);
        link_->sink = nullptr;
        free = free || link_->closed;
      }
      if (free) delete link_;
      link_ = nullptr;
    }
    if (conn_ != nullptr) natsConnection_Destroy(conn_);  // posts the closed callback, which frees the link
    conn_ = nullptr;
  }

  // The connection's callbacks' way to the sink; see Callbacks at the top.
  struct Link {
    std::mutex mutex;          // held while a callback runs on the sink
    NatsSink* sink = nullptr;  // null once the sink closed
    bool closed = false;       // the closed callback ran
  };

  // Runs f on the sink unless it closed.
  template <typename F>
  static void on_sink(void* link, F&& f) {
    auto* l = static_cast<Link*>(link);
    std::lock_guard lock(l->mutex);
    if (l->sink != nullptr) f(*l->sink);
  }

  static void on_closed(natsConnection*, void* link) {
    auto* l = static_cast<Link*>(link);
    bool free = false;
    {
      std::lock_guard lock(l->mutex);
      l->closed = true;
      free = l->sink == nullptr;
    }
    if (free) delete l;
  }

  static int64_t reconnect_delay(natsConnection*, int attempts, void* link) {
    int64_t delay = 1000;  // closing: the close wakes the client's wait
    on_sink(link, [&](NatsSink& sink) {
      delay = sink.retry_initial_ms_;
      for (int i = 1; i < attempts && delay < sink.retry_max_ms_; ++i) delay *= 2;
      delay = std::min<int64_t>(delay, sink.retry_max_ms_);
    });
    return delay;
  }

  static void on_disconnected(natsConnection*, void* link) {
    on_sink(link, [](NatsSink& sink) { sink.lost_server(); });
  }

  static void on_reconnected(natsConnection*, void* link) {
    on_sink(link, [](NatsSink& sink) { sink.reconnected(); });
  }

  void lost_server() {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    down_since_ = Clock::now();
    log().warn("{}: lost the NATS server at {}; reconnecting (retry from {} ms up to {} ms)", what_, url_, retry_initial_ms_,
               retry_max_ms_);
  }

  void reconnected() {
    {
      std::lock_guard lock(mutex_);
      if (down_since_) {
        log().info("{}: connected to NATS at {} after {:.1f} s", what_, url_,
                   std::chrono::duration<double>(Clock::now() - *down_since_).count());
      }
      down_since_.reset();
    }
    wake_.notify_one();
  }

  // Called by the client's thread for every message of a batch: acknowledged or failed.
  static void on_ack(jsCtx*, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* self) {
    auto* sink = static_cast<NatsSink*>(self);
    {
      std::lock_guard lock(sink->ack_mutex_);
      const auto it = sink->in_flight_.find(msg);
      if (it != sink->in_flight_.end()) {
        if (pae == nullptr) {
          sink->acked_[it->second] = 1;
          if (pa != nullptr && pa->Duplicate) ++sink->duplicates_;
        } else if (sink->last_error_.empty()) {
          sink->last_error_ = pae->ErrText != nullptr && *pae->ErrText ? pae->ErrText : status_text(pae->Err);
        }
        sink->in_flight_.erase(it);
      }
    }
    natsMsg_Destroy(msg);
  }

  bool connected() { return natsConnection_Status(conn_) == NATS_CONN_STATUS_CONNECTED; }

  // Checks that the JetStream stream exists, creating it when allowed. False: try again later.
  bool ensure_stream() {
    jsStreamInfo* info = nullptr;
    jsErrCode code = static_cast<jsErrCode>(0);
    natsStatus s = js_GetStreamInfo(&info, js_, stream_.c_str(), nullptr, &code);
    if (s == NATS_OK) {
      jsStreamInfo_Destroy(info);
      return true;
    }
    if (s != NATS_NOT_FOUND) {
      complain(fmt::format("cannot read JetStream stream '{}': {}", stream_, status_text(s)));
      return false;
    }
    if (!create_stream_) {
      complain(fmt::format("no JetStream stream '{}' (create it, or set create_stream: true)", stream_));
      return false;
    }
    jsStreamConfig config;
    jsStreamConfig_Init(&config);
    config.Name = stream_.c_str();
    const char* subjects[] = {stream_subject_.c_str()};
    config.Subjects = subjects;
    config.SubjectsLen = 1;
    config.Storage = js_FileStorage;
    s = js_AddStream(&info, js_, &config, nullptr, &code);
    if (s != NATS_OK) {
      complain(fmt::format("cannot create JetStream stream '{}' on '{}': {} ({})", stream_, stream_subject_, status_text(s),
                           nats_GetLastError(nullptr) ? nats_GetLastError(nullptr) : ""));
      return false;
    }
    jsStreamInfo_Destroy(info);
    log().info("{}: created JetStream stream '{}' (subjects '{}')", what_, stream_, stream_subject_);
    return true;
  }

  // One warning per kind of trouble until publishing works again (no flood while the server is away).
  void complain(const std::string& message) {
    if (message == last_complaint_) return;
    last_complaint_ = message;
    log().warn("{}: {}", what_, message);
  }

  // Waits for the backoff (doubling) or the close deadline, whichever comes first.
  void back_off() {
    std::unique_lock lock(mutex_);
    const auto until = Clock::now() + std::chrono::milliseconds(backoff_ms_);
    for (;;) {  // close() brings the end forward to its deadline
      const auto end = stopping_ ? std::min(until, deadline_) : until;
      if (Clock::now() >= end) break;
      wake_.wait_until(lock, end);
    }
    backoff_ms_ = std::min(backoff_ms_ * 2, retry_max_ms_);
  }

  void publish_loop() {
    set_thread_name("rw-sink-nats");
    backoff_ms_ = retry_initial_ms_;
    for (;;) {
      std::size_t waiting = 0;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, everything acknowledged
        if (stopping_ && Clock::now() >= deadline_) break;
        waiting = queue_.size();
      }
      if (!connected() || (!stream_ready_ && !(stream_ready_ = ensure_stream()))) {
        back_off();
        continue;
      }
      // Only this thread pops; write() appends, which leaves references to the front valid.
      const std::size_t n = std::min<std::size_t>(waiting, max_pending_);
      std::size_t sent = 0;
      {
        std::lock_guard lock(ack_mutex_);
        acked_.assign(n, 0);
        last_error_.clear();
      }
      jsPubOptions po;
      jsPubOptions_Init(&po);
      po.MaxWait = ack_timeout_ms_;
      natsStatus s = NATS_OK;
      for (; sent < n; ++sent) {
        const Message* m;
        {
          std::lock_guard lock(mutex_);
          m = &queue_[sent];
        }
        natsMsg* msg = nullptr;
        s = natsMsg_Create(&msg, m->subject->c_str(), nullptr, m->body.data(), static_cast<int>(m->body.size()));
        if (s == NATS_OK) s = natsMsgHeader_Set(msg, "Nats-Msg-Id", m->id.c_str());
        if (s == NATS_OK) {
          std::lock_guard lock(ack_mutex_);
          in_flight_[msg] = sent;
        }
        natsMsg* handle = msg;
        if (s == NATS_OK) s = js_PublishMsgAsync(js_, &handle, &po);
        if (s == NATS_OK) published_ = true;
        if (s != NATS_OK) {
          std::lock_guard lock(ack_mutex_);
          in_flight_.erase(msg);
          natsMsg_Destroy(handle);  // still ours when the publish refused it
          break;
        }
      }
      jsPubOptions wait;
      jsPubOptions_Init(&wait);
      wait.MaxWait = ack_timeout_ms_;
      js_PublishAsyncComplete(js_, &wait);
      std::size_t done = 0;
      std::string error;
      {
        std::lock_guard lock(ack_mutex_);
        in_flight_.clear();  // a late ack is ignored: its message is resent (and deduplicated)
        while (done < sent && acked_[done]) ++done;
        error = last_error_;
      }
      {
        std::lock_guard lock(mutex_);
        for (std::size_t i = 0; i < done; ++i) queue_.pop_front();
      }
      written_ += static_cast<std::int64_t>(done);
      if (done == n) {
        backoff_ms_ = retry_initial_ms_;
        last_complaint_.clear();
        continue;
      }
      if (error.empty()) error = s != NATS_OK ? status_text(s) : "no acknowledgment within ack_timeout_ms";
      if (error.find("no responders") != std::string::npos) stream_ready_ = false;  // the stream may be gone
      complain(fmt::format("publishing to {} failed ({}); retrying from the first unacknowledged message", url_, error));
      back_off();
    }
    // The close deadline passed with messages unacknowledged.
    std::lock_guard lock(mutex_);
    failed_ += static_cast<std::int64_t>(queue_.size());
    log().error("{}: {} message(s) not acknowledged by JetStream stream '{}' at {} within flush_timeout_ms ({} ms): counted as failed",
                what_, queue_.size(), stream_, url_, flush_timeout_ms_);
    queue_.clear();
  }

  void stop() {
    {
      std::lock_guard lock(mutex_);
      if (!stopping_) deadline_ = Clock::now() + std::chrono::milliseconds(flush_timeout_ms_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (publisher_.joinable()) publisher_.join();
  }

  std::string what_, pipeline_, url_;
  std::vector<std::string> servers_, subjects_;  // subjects_ by stream index
  std::vector<std::string> stream_names_;        // by stream index
  std::vector<bool> stream_live_;                // by stream index
  bool subject_per_stream_ = true, resume_ = true, resume_warned_ = false;
  int resume_wait_ms_ = 5000;
  std::int64_t run_id_ = 0;                      // the sink's start, Unix ms: live streams' ids
  std::atomic<std::int64_t> duplicates_{0};      // acknowledged as already stored
  std::string stream_, stream_subject_;
  bool create_stream_ = true;
  int max_pending_ = 256, ack_timeout_ms_ = 2000, flush_timeout_ms_ = 5000;
  int retry_initial_ms_ = 100, retry_max_ms_ = 5000;
  std::int64_t buffer_ = 10000;

  natsConnection* conn_ = nullptr;
  jsCtx* js_ = nullptr;
  Link* link_ = nullptr;  // the connection's callbacks' closure; freed as Callbacks at the top says

  std::mutex mutex_;  // queue_, stopping_, deadline_, down_since_
  std::condition_variable wake_;
  std::deque<Message> queue_;  // waiting and in flight, oldest first
  bool stopping_ = false;
  Clock::time_point deadline_;
  std::optional<Clock::time_point> down_since_;

  std::mutex ack_mutex_;  // the batch in flight
  std::unordered_map<natsMsg*, std::size_t> in_flight_;
  std::vector<char> acked_;
  std::string last_error_;

  std::atomic<bool> stream_ready_{false};  // the JetStream stream exists (checked or created)
  int backoff_ms_ = 100;           // the publisher thread's
  bool published_ = false;         // the publisher thread's; read by close once it is joined
  std::string last_complaint_;     // the publisher thread's
  std::thread publisher_;
};

}  // namespace

RW_REGISTER_SINK("nats", NatsSink);

}  // namespace redwood
