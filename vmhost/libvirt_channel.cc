#include "vmhost/libvirt_channel.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "lobby/base/log.h"
#include "vmhost/libvirt_events.h"
#include "vmhost/libvirt_handles.h"

namespace warren {
namespace {

// One virStreamSend at most this big (libvirt's stream packets carry up to 256 KiB); a
// callback sends a few, so other connections' events get their turn in between.
constexpr size_t kSendChunk = size_t{64} * 1024;
constexpr int kSendsPerCallback = 4;

std::atomic<int> g_open_pumps{0};

// Bytes waiting to go one way: a fixed-size buffer filled at the back, drained at the front.
class ByteQueue {
 public:
  explicit ByteQueue(size_t capacity) : buf_(capacity) {}
  bool empty() const { return begin_ == end_; }
  bool full() const { return size() == buf_.size(); }
  size_t size() const { return end_ - begin_; }
  const char* data() const { return buf_.data() + begin_; }
  // Where up to room() bytes may be written; Commit(n) keeps them.
  char* space() {
    if (begin_ > 0 && end_ == buf_.size()) {
      std::memmove(buf_.data(), buf_.data() + begin_, size());
      end_ -= begin_;
      begin_ = 0;
    }
    return buf_.data() + end_;
  }
  size_t room() {
    space();
    return buf_.size() - end_;
  }
  void Commit(size_t n) { end_ += n; }
  void Consume(size_t n) {
    begin_ += n;
    if (begin_ == end_) begin_ = end_ = 0;
  }
  void Clear() { begin_ = end_ = 0; }

 private:
  std::vector<char> buf_;
  size_t begin_ = 0;
  size_t end_ = 0;
};

// The pump of one channel. Created on the caller's thread, then touched only on libvirt's
// event loop thread (Start runs there, from a one-shot timeout). Its references: one while
// it is open (Close drops it), one for each registration with a free callback (the start
// timeout, the socket's handle: libvirt frees those later, from an idle callback), and one
// for each callback in progress, so a pump is never freed under its own callback. The
// stream's callback has no free callback: it is registered and removed on the loop thread,
// where every stream callback runs, so once Close removed it nothing calls it again (and
// libvirt 9.0 was seen not to call a stream callback's free function when the callback is
// removed and the stream finished from inside it).
class Pump {
 public:
  Pump(std::string what, StreamHandle stream, UniqueFd fd)
      : what_(std::move(what)),
        stream_(std::move(stream)),
        fd_(std::move(fd)),
        to_stream_(kChannelBufferBytes),
        to_fd_(kChannelBufferBytes) {
    g_open_pumps.fetch_add(1);
  }
  // Runs once every reference is gone: Close ran, or the loop never took the pump (the
  // members then abort the stream and close the socket).
  ~Pump() { g_open_pumps.fetch_sub(1); }
  Pump(const Pump&) = delete;
  Pump& operator=(const Pump&) = delete;

  void Ref() { refs_.fetch_add(1); }
  static void Release(void* opaque) {
    auto* p = static_cast<Pump*>(opaque);
    if (p->refs_.fetch_sub(1) == 1) delete p;
  }

  // The start timeout: registers the socket's handle and the stream's callback.
  static void OnStart(int timer, void* opaque) {
    virEventRemoveTimeout(timer);  // one shot; its free callback releases its reference
    auto* p = static_cast<Pump*>(opaque);
    p->Ref();
    p->Start();
    Release(p);
  }
  static void OnFd(int /*watch*/, int /*fd*/, int events, void* opaque) {
    auto* p = static_cast<Pump*>(opaque);
    p->Ref();
    p->FdEvent(events);
    Release(p);
  }
  static void OnStream(virStreamPtr /*st*/, int events, void* opaque) {
    auto* p = static_cast<Pump*>(opaque);
    p->Ref();
    p->StreamEvent(events);
    Release(p);
  }

 private:
  void Start() {
    if (closed_) return;
    fd_events_ = FdEventsWanted();
    Ref();
    watch_ = virEventAddHandle(fd_.get(), fd_events_, &Pump::OnFd, this, &Pump::Release);
    if (watch_ < 0) {
      refs_.fetch_sub(1);  // not registered: no free callback will come
      return Fail(LibvirtError("watching the channel's socket"));
    }
    stream_events_ = StreamEventsWanted();
    if (virStreamEventAddCallback(stream_.get(), stream_events_, &Pump::OnStream, this, nullptr) <
        0) {
      return Fail(LibvirtError("watching the channel's stream"));
    }
    stream_registered_ = true;
  }

  void FdEvent(int events) {
    if (closed_) return;
    if (events & VIR_EVENT_HANDLE_READABLE) ReadFd();
    if (!closed_ && (events & VIR_EVENT_HANDLE_WRITABLE)) WriteFd();
    if (!closed_ && (events & (VIR_EVENT_HANDLE_HANGUP | VIR_EVENT_HANDLE_ERROR))) {
      // The caller closed its end (or shut it down both ways): nobody reads any more.
      if (!fd_eof_) ReadFd();  // what it wrote last, before the hang-up
      CallerGone();
    }
    if (!closed_) Step();
  }

  void StreamEvent(int events) {
    if (closed_) return;
    if (events & VIR_STREAM_EVENT_READABLE) RecvStream();
    if (!closed_ && (events & VIR_STREAM_EVENT_WRITABLE)) SendStream();
    if (!closed_ && (events & (VIR_STREAM_EVENT_ERROR | VIR_STREAM_EVENT_HANGUP))) {
      RecvStream();  // what is queued, then the EOF or the error
      if (!closed_ && !stream_eof_) return Fail(Unavailable("the channel's stream hung up"));
    }
    if (!closed_) Step();
  }

  void ReadFd() {
    while (!fd_eof_ && to_stream_.room() > 0) {
      ssize_t n = ::recv(fd_.get(), to_stream_.space(), to_stream_.room(), MSG_DONTWAIT);
      if (n > 0) {
        to_stream_.Commit(static_cast<size_t>(n));
      } else if (n == 0) {
        fd_eof_ = true;
      } else if (errno == EINTR) {
        continue;
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return;
      } else if (errno == ECONNRESET) {
        fd_eof_ = true;
        return CallerGone();
      } else {
        return Fail(Internal(std::string("reading the channel's socket: ") + std::strerror(errno)));
      }
    }
  }

  void WriteFd() {
    while (!to_fd_.empty()) {
      ssize_t n = ::send(fd_.get(), to_fd_.data(), to_fd_.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        to_fd_.Consume(static_cast<size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return;
      } else {
        return CallerGone();  // EPIPE, ECONNRESET: the caller closed its end
      }
    }
  }

  void RecvStream() {
    while (!stream_eof_ && to_fd_.room() > 0) {
      int n = virStreamRecv(stream_.get(), to_fd_.space(), to_fd_.room());
      if (n > 0) {
        to_fd_.Commit(static_cast<size_t>(n));
      } else if (n == 0) {
        stream_eof_ = true;
      } else if (n == -2) {
        return;
      } else {
        return Fail(Unavailable(LibvirtError("reading the channel's stream").message()));
      }
    }
  }

  void SendStream() {
    for (int i = 0; i < kSendsPerCallback && !to_stream_.empty(); ++i) {
      size_t len = std::min(to_stream_.size(), kSendChunk);
      int n = virStreamSend(stream_.get(), to_stream_.data(), len);
      if (n > 0) {
        to_stream_.Consume(static_cast<size_t>(n));
      } else if (n == -2) {
        return;
      } else {
        return Fail(Unavailable(LibvirtError("writing the channel's stream").message()));
      }
    }
  }

  // The caller's end is gone: nothing more is read from the stream for it; what it wrote
  // is still sent (Step ends the channel once that is out).
  // The socket is no longer watched: a hang-up is reported on every turn of the loop, asked
  // for or not.
  void CallerGone() {
    fd_eof_ = true;
    caller_gone_ = true;
    to_fd_.Clear();
    if (watch_ >= 0) virEventRemoveHandle(watch_);  // its free callback comes later
    watch_ = -1;
  }

  // After each event: ends the channel when one side is done, else updates what each side
  // is watched for.
  void Step() {
    if (caller_gone_ && to_stream_.empty()) return Close(/*finish=*/true, "the caller closed");
    if (stream_eof_ && to_fd_.empty()) return Close(/*finish=*/true, "the stream ended");
    int fd_events = FdEventsWanted();
    if (watch_ >= 0 && fd_events != fd_events_) {
      virEventUpdateHandle(watch_, fd_events);
      fd_events_ = fd_events;
    }
    int stream_events = StreamEventsWanted();
    if (stream_events != stream_events_) {
      virStreamEventUpdateCallback(stream_.get(), stream_events);
      stream_events_ = stream_events;
    }
  }

  // Hang-ups always: libvirt's (GLib) event loop reports only what is asked for, and a
  // caller that closes is seen by its hang-up (its EOF alone may be a shutdown for writing).
  int FdEventsWanted() {
    int e = VIR_EVENT_HANDLE_HANGUP | VIR_EVENT_HANDLE_ERROR;
    if (!fd_eof_ && to_stream_.room() > 0) e |= VIR_EVENT_HANDLE_READABLE;
    if (!to_fd_.empty()) e |= VIR_EVENT_HANDLE_WRITABLE;
    return e;
  }
  int StreamEventsWanted() {
    int e = 0;
    if (!stream_eof_ && !caller_gone_ && to_fd_.room() > 0) e |= VIR_STREAM_EVENT_READABLE;
    if (!to_stream_.empty()) e |= VIR_STREAM_EVENT_WRITABLE;
    return e;
  }

  void Fail(const Status& why) { Close(/*finish=*/false, why.message()); }

  // Ends the channel, once: both registrations removed, the stream finished (when everything
  // was said) or aborted, freed, and the socket closed, so the caller's end sees EOF after
  // what was written to it; then the open reference goes (the caller's callback holds one).
  void Close(bool finish, const std::string& why) {
    if (closed_) return;
    closed_ = true;
    if (watch_ >= 0) virEventRemoveHandle(watch_);
    watch_ = -1;
    if (stream_registered_) virStreamEventRemoveCallback(stream_.get());
    stream_registered_ = false;
    if (stream_ != nullptr) {
      if (finish && virStreamFinish(stream_.get()) < 0) {
        LogDebug("vmhost: " + LibvirtError("finishing " + what_).ToString());
      }
      stream_.reset();  // aborts what was not finished, frees
    }
    fd_.reset();
    if (!why.empty()) {
      LogDebug("vmhost: " + what_ + " closed: " + why);
    }
    Release(this);
  }

  const std::string what_;
  StreamHandle stream_;
  UniqueFd fd_;
  ByteQueue to_stream_;       // read from the caller's socket, to send to the stream
  ByteQueue to_fd_;           // received from the stream, to write to the caller's socket
  std::atomic<int> refs_{1};  // the open reference
  int watch_ = -1;
  bool stream_registered_ = false;
  int fd_events_ = 0;
  int stream_events_ = 0;
  bool fd_eof_ = false;       // nothing more to read from the caller
  bool caller_gone_ = false;  // nor anyone to write to
  bool stream_eof_ = false;
  bool closed_ = false;
};

}  // namespace

Result<UniqueFd> OpenDomainChannel(virConnectPtr conn, const std::string& domain_name,
                                   const std::string& channel) {
  StartLibvirtEventLoop();  // opening the connection did already; cheap when it did
  const std::string what = "channel " + channel + " of domain " + domain_name;
  DomainHandle dom(virDomainLookupByName(conn, domain_name.c_str()));
  if (dom == nullptr) return LibvirtError("looking up domain " + domain_name);
  StreamHandle stream(virStreamNew(conn, VIR_STREAM_NONBLOCK));
  if (stream == nullptr) {
    return Unavailable(LibvirtError("making a stream for the " + what).message());
  }
  // No VIR_DOMAIN_CHANNEL_FORCE: see the header (two live holders must not steal it).
  if (virDomainOpenChannel(dom.get(), channel.c_str(), stream.get(), 0) < 0) {
    Status st = LibvirtError("opening the " + what);
    if (st.code() == Code::kNotFound || st.code() == Code::kConflict) return st;
    return Unavailable(st.message());
  }
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0) {
    return Internal(std::string("socketpair: ") + std::strerror(errno));
  }
  UniqueFd ours(pair[0]);
  UniqueFd theirs(pair[1]);
  auto* pump = new Pump(what, std::move(stream), std::move(ours));
  pump->Ref();  // the start timeout's
  // Everything from here runs on the event loop thread: the pump is not touched here again.
  if (virEventAddTimeout(0, &Pump::OnStart, pump, &Pump::Release) < 0) {
    Status st = LibvirtError("scheduling the " + what);
    Pump::Release(pump);  // the timeout's, never registered
    Pump::Release(pump);  // the open one: the stream is aborted, our end closed
    return Internal(st.message() + " (is libvirt's event loop running?)");
  }
  return theirs;
}

int OpenDomainChannelCount() { return g_open_pumps.load(); }

}  // namespace warren
