#include "stages/source/video_decoder.hpp"

#include "core/error.hpp"
#include "stages/frame_memory.hpp"

#include <fmt/format.h>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/error.h>
#include <libavutil/log.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
}

#include <algorithm>
#include <mutex>

namespace redwood {

namespace {

std::string av_error(int code) {
  char text[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(code, text, sizeof text);
  return text;
}

// FFmpeg logs to stderr at "info" by default: a damaged packet would print lines of its own
// between Redwood's. Errors reach the caller as counts and exceptions instead.
void quiet_ffmpeg_once() {
  static std::once_flag once;
  std::call_once(once, [] { av_log_set_level(AV_LOG_FATAL); });
}

}  // namespace

struct VideoDecoder::State {
  std::filesystem::path path;
  AVFormatContext* format = nullptr;
  AVCodecContext* codec = nullptr;  // made at the first read (the thread count is known then)
  const AVCodec* decoder = nullptr;
  SwsContext* sws = nullptr;
  AVPacket* packet = nullptr;
  AVFrame* frame = nullptr;
  int stream = -1;
  int threads = 1;
  bool draining = false;  // the file is read to its end; the decoder gives its last pictures
  std::int64_t skip_before = AV_NOPTS_VALUE;  // after seek_frame(): pictures before this time are dropped
  std::int64_t corrupt = 0;

  ~State() { close(); }

  [[noreturn]] void fail(const std::string& what, int code) const {
    throw IoError(fmt::format("video '{}': {}: {}", path.string(), what, av_error(code)));
  }

  void open() {
    int r = avformat_open_input(&format, path.c_str(), nullptr, nullptr);
    if (r < 0) fail("FFmpeg cannot open it", r);
    if ((r = avformat_find_stream_info(format, nullptr)) < 0) fail("FFmpeg cannot read its streams", r);
    stream = av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, &decoder, 0);
    if (stream == AVERROR_STREAM_NOT_FOUND) {
      throw IoError(fmt::format("video '{}': the file has no video stream", path.string()));
    }
    if (stream < 0 || decoder == nullptr) {
      const AVCodecID id = stream >= 0 ? format->streams[stream]->codecpar->codec_id : AV_CODEC_ID_NONE;
      throw IoError(fmt::format("video '{}': FFmpeg has no decoder for its video ({})", path.string(),
                                id == AV_CODEC_ID_NONE ? "unknown codec" : avcodec_get_name(id)));
    }
    packet = av_packet_alloc();
    frame = av_frame_alloc();
    if (packet == nullptr || frame == nullptr) throw IoError(fmt::format("video '{}': out of memory", path.string()));
  }

  void start_decoder() {
    codec = avcodec_alloc_context3(decoder);
    if (codec == nullptr) throw IoError(fmt::format("video '{}': out of memory", path.string()));
    int r = avcodec_parameters_to_context(codec, format->streams[stream]->codecpar);
    if (r < 0) fail("FFmpeg cannot set its decoder up", r);
    codec->thread_count = threads;
    if ((r = avcodec_open2(codec, decoder, nullptr)) < 0) fail(fmt::format("FFmpeg cannot open its {} decoder", decoder->name), r);
  }

  void close() {
    sws_freeContext(sws);
    sws = nullptr;
    av_frame_free(&frame);
    av_packet_free(&packet);
    avcodec_free_context(&codec);
    avformat_close_input(&format);
    draining = false;
  }

  AVStream* video() const { return format->streams[stream]; }
  // The stream's first time (its timestamps count from there) and its declared frame rate.
  std::int64_t start_time() const { return video()->start_time == AV_NOPTS_VALUE ? 0 : video()->start_time; }
  AVRational rate() const { return av_guess_frame_rate(format, video(), nullptr); }
  static std::int64_t timestamp(const AVFrame* f) {
    return f->best_effort_timestamp == AV_NOPTS_VALUE ? f->pts : f->best_effort_timestamp;
  }

  // To the key frame at or before `ts` (stream time), the decoder emptied; false if the file
  // cannot seek.
  bool seek_to(std::int64_t ts) {
    if (av_seek_frame(format, stream, ts, AVSEEK_FLAG_BACKWARD) < 0) return false;
    if (codec != nullptr) avcodec_flush_buffers(codec);
    draining = false;
    return true;
  }

  // The next decoded picture into `frame`; false at the end.
  bool next_frame() {
    if (codec == nullptr) start_decoder();
    for (;;) {
      int r = avcodec_receive_frame(codec, frame);
      if (r == 0) return true;
      if (r == AVERROR_EOF) return false;
      if (r != AVERROR(EAGAIN)) ++corrupt;  // a picture that failed: the next packets may still decode
      if (draining) return false;
      r = av_read_frame(format, packet);
      if (r < 0) {
        // The end of the file (or a read error, which ends it the same way): flush the decoder.
        draining = true;
        avcodec_send_packet(codec, nullptr);
        continue;
      }
      if (packet->stream_index == stream && avcodec_send_packet(codec, packet) < 0) ++corrupt;
      av_packet_unref(packet);
    }
  }
};

VideoDecoder::VideoDecoder(const std::filesystem::path& path) : s_(std::make_unique<State>()) {
  quiet_ffmpeg_once();
  s_->path = path;
  s_->open();
}

VideoDecoder::~VideoDecoder() = default;

int VideoDecoder::width() const { return s_->video()->codecpar->width; }
int VideoDecoder::height() const { return s_->video()->codecpar->height; }

int automatic_decoder_threads(int cores, int open_sources, int width, int height) {
  const int share = std::max(1, cores / std::max(1, open_sources));
  const std::int64_t pixels = width > 0 && height > 0 ? std::int64_t{width} * height : 1'000'000;
  const auto by_size = static_cast<int>((pixels + 999'999) / 1'000'000);
  return std::clamp(by_size, 1, share);
}

void VideoDecoder::set_threads(int threads) { s_->threads = std::max(0, threads); }

bool VideoDecoder::read(Picture& bgr, double& pts_ms, FrameMemory* memory) {
  AVFrame* f = s_->frame;
  for (;;) {
    if (!s_->next_frame()) return false;
    const std::int64_t ts = State::timestamp(f);
    if (s_->skip_before == AV_NOPTS_VALUE || ts == AV_NOPTS_VALUE || ts >= s_->skip_before) break;
    av_frame_unref(f);  // between the key frame a seek landed on and the frame asked for
  }
  s_->skip_before = AV_NOPTS_VALUE;
  s_->sws = sws_getCachedContext(s_->sws, f->width, f->height, static_cast<AVPixelFormat>(f->format), f->width,
                                 f->height, AV_PIX_FMT_BGR24, SWS_BICUBIC, nullptr, nullptr, nullptr);
  if (s_->sws == nullptr) {
    av_frame_unref(f);
    throw IoError(fmt::format("video '{}': FFmpeg cannot convert its {}x{} {} pictures to BGR", s_->path.string(),
                              f->width, f->height, av_get_pix_fmt_name(static_cast<AVPixelFormat>(f->format))));
  }
  if (bgr.width != f->width || bgr.height != f->height || bgr.channels != 3 || bgr.owner.use_count() != 1) {
    bgr = frame_picture(memory, f->width, f->height, 3);
  }
  std::uint8_t* dst[4] = {bgr.data, nullptr, nullptr, nullptr};
  int dst_stride[4] = {static_cast<int>(bgr.stride), 0, 0, 0};
  sws_scale(s_->sws, f->data, f->linesize, 0, f->height, dst, dst_stride);
  const std::int64_t ts = State::timestamp(f);
  pts_ms = ts == AV_NOPTS_VALUE ? 0.0 : static_cast<double>(ts - s_->start_time()) * av_q2d(s_->video()->time_base) * 1000.0;
  av_frame_unref(f);
  return true;
}

bool VideoDecoder::seek_frame(std::int64_t index) {
  const AVRational rate = s_->rate();
  if (index < 0 || rate.num <= 0 || rate.den <= 0) return false;
  const AVRational time_base = s_->video()->time_base;
  const std::int64_t start = s_->start_time();
  if (!s_->seek_to(start + av_rescale_q(index, av_inv_q(rate), time_base))) return false;
  // Pictures from half a frame before the target on are kept: a container's rounded timestamps
  // must not drop the frame asked for.
  s_->skip_before = start + av_rescale_q(2 * index - 1, av_inv_q(av_mul_q(rate, AVRational{2, 1})), time_base);
  return true;
}

void VideoDecoder::rewind() {
  s_->corrupt = 0;
  s_->skip_before = AV_NOPTS_VALUE;
  if (s_->seek_to(s_->start_time())) return;
  s_->close();  // a file that cannot seek is read again from its start
  s_->open();
}

double VideoDecoder::frame_rate() const {
  const AVRational rate = s_->rate();
  return rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0.0;
}

std::int64_t VideoDecoder::declared_frames() const { return std::max<std::int64_t>(0, s_->video()->nb_frames); }

std::int64_t VideoDecoder::corrupt_packets() const { return s_->corrupt; }

}  // namespace redwood
