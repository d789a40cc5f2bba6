#include "vmhost/libvirt_channel.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "lobby/base/log.h"
#include "vmhost/libvirt_events.h"
#include "vmhost/libvirt_handles.h"

namespace warren {
namespace {

// One virStreamSend at most this big (libvirt's stream packets carry up to 256 KiB): what
// the sender thread takes out of the buffer at a time.
constexpr size_t kSendChunk = size_t{64} * 1024;

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

// The pump of one channel. Created on the caller's thread; then everything but sending to
// the stream runs on libvirt's event loop thread (Start runs there, from a one-shot
// timeout), and the sends run on the pump's sender thread, which alone may block.
//
// Its references: one while it is open (Close drops it), one for each registration with a
// free callback (the start timeout, the socket's and the wake-up's handles: libvirt frees
// those later, from an idle callback), one for each callback in progress, so a pump is
// never freed under its own callback, and the sender thread's, dropped as it ends. The
// stream's callback has no free callback: it is registered and removed on the loop thread,
// where every stream callback runs, so once Close removed it nothing calls it again (and
// libvirt 9.0 was seen not to call a stream callback's free function when the callback is
// removed and the stream finished from inside it).
//
// Shared between the two threads, under mu_: to_stream_, end_ and the sender's failure.
// The stream itself: the loop thread receives (non-blocking) and registers its callback,
// the sender thread sends; once Close told the sender to end, only the sender touches it
// (finishes or aborts it, frees it). The wake-up eventfd outlives both (the destructor
// closes it), so the sender never writes to a descriptor closed under it.
class Pump {
 public:
  Pump(std::string what, StreamHandle stream, UniqueFd fd, UniqueFd wake)
      : what_(std::move(what)),
        stream_(std::move(stream)),
        fd_(std::move(fd)),
        wake_(std::move(wake)),
        to_stream_(kChannelBufferBytes),
        to_fd_(kChannelBufferBytes) {
    g_open_pumps.fetch_add(1);
  }
  // Runs once every reference is gone: Close ran and the sender ended, or the pump never
  // started (the members then abort the stream and close the sockets).
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
  static void OnWake(int /*watch*/, int /*fd*/, int /*events*/, void* opaque) {
    auto* p = static_cast<Pump*>(opaque);
    p->Ref();
    p->WakeEvent();
    Release(p);
  }

  // Starts the sender thread (it holds a reference until it ends). False when no thread
  // can be had.
  bool StartSender() {
    Ref();
    try {
      std::thread([this] { SenderMain(); }).detach();
    } catch (const std::system_error&) {
      refs_.fetch_sub(1);
      return false;
    }
    return true;
  }
  // Tells the sender to end (finish the stream once the buffer is sent, or abort it now):
  // for a pump that never started, which Close never ends.
  void EndSender(bool finish) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (end_ == End::kNone) end_ = finish ? End::kFinish : End::kAbort;
    }
    cv_.notify_all();
  }

 private:
  void Start() {
    if (closed_) return;
    Ref();
    wake_watch_ = virEventAddHandle(wake_.get(), VIR_EVENT_HANDLE_READABLE, &Pump::OnWake, this,
                                    &Pump::Release);
    if (wake_watch_ < 0) {
      refs_.fetch_sub(1);  // not registered: no free callback will come
      return Fail(LibvirtError("watching the channel's sender"));
    }
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
    if (!closed_ && (events & (VIR_STREAM_EVENT_ERROR | VIR_STREAM_EVENT_HANGUP))) {
      RecvStream();  // what is queued, then the EOF or the error
      if (!closed_ && !stream_eof_) return Fail(Unavailable("the channel's stream hung up"));
    }
    if (!closed_) Step();
  }

  // The sender's news: it made room in to_stream_ (the socket may be read again), or failed.
  void WakeEvent() {
    if (closed_) return;
    uint64_t n;
    while (::read(wake_.get(), &n, sizeof n) > 0) {
    }
    std::string failed;
    {
      std::lock_guard<std::mutex> lk(mu_);
      failed = send_error_;
    }
    if (!failed.empty()) return Fail(Unavailable(failed));
    Step();
  }

  void ReadFd() {
    bool got = false;
    int err = 0;
    {
      std::lock_guard<std::mutex> lk(mu_);
      while (!fd_eof_ && to_stream_.room() > 0) {
        ssize_t n = ::recv(fd_.get(), to_stream_.space(), to_stream_.room(), MSG_DONTWAIT);
        if (n > 0) {
          to_stream_.Commit(static_cast<size_t>(n));
          got = true;
        } else if (n == 0) {
          fd_eof_ = true;
        } else if (errno == EINTR) {
          continue;
        } else {
          if (errno != EAGAIN && errno != EWOULDBLOCK) err = errno;
          break;
        }
      }
    }
    if (got) cv_.notify_all();
    if (err == ECONNRESET) {
      fd_eof_ = true;
      CallerGone();
    } else if (err != 0) {
      Fail(Internal(std::string("reading the channel's socket: ") + std::strerror(err)));
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

  // The sender thread: takes a chunk out of to_stream_ at a time and sends it, blocking as
  // long as libvirt does (see the header); the loop thread is told (wake_) when there is
  // room again or the send failed. Once Close (or EndSender) set end_: on kFinish, what is
  // still buffered is sent and the stream finished; on kAbort, or after a failure, nothing
  // more is sent. Then the stream is aborted (unless finished) and freed, and the thread
  // drops its reference: the last thing it does.
  void SenderMain() {
    std::vector<char> chunk(kSendChunk);
    bool failed = false;
    End end = End::kNone;
    for (;;) {
      size_t len = 0;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return end_ != End::kNone || (!failed && !to_stream_.empty()); });
        end = end_;
        if (!failed && end != End::kAbort && !to_stream_.empty()) {
          len = std::min(to_stream_.size(), kSendChunk);
          std::memcpy(chunk.data(), to_stream_.data(), len);
          to_stream_.Consume(len);
        }
      }
      if (len == 0) break;  // told to end, and nothing (more) to send
      Wake();               // room for more from the caller
      if (!SendAll(chunk.data(), len)) {
        failed = true;
        Wake();
      }
    }
    if (end == End::kFinish && !failed && virStreamFinish(stream_.get()) < 0) {
      LogDebug("vmhost: " + LibvirtError("finishing " + what_).ToString());
    }
    stream_.reset();  // aborts what was not finished, frees
    Release(this);
  }

  bool SendAll(const char* data, size_t len) {
    while (len > 0) {
      int n = virStreamSend(stream_.get(), data, len);
      if (n > 0) {
        data += n;
        len -= static_cast<size_t>(n);
      } else if (n == -2) {  // a driver that does not block after all: wait a little
        {
          std::lock_guard<std::mutex> lk(mu_);
          if (end_ == End::kAbort) return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      } else {
        std::string why = LibvirtError("writing the channel's stream").message();
        std::lock_guard<std::mutex> lk(mu_);
        send_error_ = why.empty() ? "writing the channel's stream failed" : why;
        return false;
      }
    }
    return true;
  }

  void Wake() {
    uint64_t one = 1;
    while (::write(wake_.get(), &one, sizeof one) < 0 && errno == EINTR) {
    }
  }

  // The caller's end is gone: nothing more is read from the stream for it; what it wrote
  // is still sent (by the sender, before it finishes the stream).
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
    if (caller_gone_) return Close(/*finish=*/true, "the caller closed");
    if (stream_eof_ && to_fd_.empty()) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        to_stream_.Clear();  // nobody at the other end to take it
      }
      return Close(/*finish=*/true, "the stream ended");
    }
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
    bool room;
    {
      std::lock_guard<std::mutex> lk(mu_);
      room = to_stream_.room() > 0;
    }
    if (!fd_eof_ && room) e |= VIR_EVENT_HANDLE_READABLE;
    if (!to_fd_.empty()) e |= VIR_EVENT_HANDLE_WRITABLE;
    return e;
  }
  // Never WRITABLE: the sender thread sends, blocking, off the loop.
  int StreamEventsWanted() {
    int e = 0;
    if (!stream_eof_ && !caller_gone_ && to_fd_.room() > 0) e |= VIR_STREAM_EVENT_READABLE;
    return e;
  }

  void Fail(const Status& why) { Close(/*finish=*/false, why.message()); }

  // Ends the channel, once: the registrations removed, the socket closed (the caller's end
  // sees EOF after what was written to it), and the sender told to end: it finishes the
  // stream once what is buffered is sent (`finish`, when everything was said) or aborts it,
  // and frees it, on its own thread, as both may wait for the daemon. Then the open
  // reference goes (the caller's callback holds one).
  void Close(bool finish, const std::string& why) {
    if (closed_) return;
    closed_ = true;
    if (watch_ >= 0) virEventRemoveHandle(watch_);
    watch_ = -1;
    if (wake_watch_ >= 0) virEventRemoveHandle(wake_watch_);
    wake_watch_ = -1;
    if (stream_registered_) virStreamEventRemoveCallback(stream_.get());
    stream_registered_ = false;
    EndSender(finish);  // from here on only the sender touches the stream
    fd_.reset();
    if (!why.empty()) {
      LogDebug("vmhost: " + what_ + " closed: " + why);
    }
    Release(this);
  }

  enum class End { kNone, kFinish, kAbort };

  const std::string what_;
  StreamHandle stream_;
  UniqueFd fd_;
  const UniqueFd wake_;  // the sender's eventfd to the loop
  std::mutex mu_;
  std::condition_variable cv_;  // the sender waits on it: data in to_stream_, or end_
  ByteQueue to_stream_;         // under mu_: read from the caller's socket, to send
  End end_ = End::kNone;        // under mu_
  std::string send_error_;      // under mu_: why the sender's send failed
  ByteQueue to_fd_;             // received from the stream, to write to the caller's socket
  std::atomic<int> refs_{1};    // the open reference
  int watch_ = -1;
  int wake_watch_ = -1;
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
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) return Internal(std::string("eventfd: ") + std::strerror(errno));
  auto* pump = new Pump(what, std::move(stream), std::move(ours), std::move(wake));
  if (!pump->StartSender()) {
    Pump::Release(pump);  // the open one: the stream is aborted, our end closed
    return Unavailable("no thread to send to the " + what);
  }
  pump->Ref();  // the start timeout's
  // Everything from here runs on the event loop thread and the sender's: the pump is not
  // touched here again.
  if (virEventAddTimeout(0, &Pump::OnStart, pump, &Pump::Release) < 0) {
    Status st = LibvirtError("scheduling the " + what);
    pump->EndSender(/*finish=*/false);  // it aborts the stream and drops its reference
    Pump::Release(pump);                // the timeout's, never registered
    Pump::Release(pump);                // the open one: our end closed
    return Internal(st.message() + " (is libvirt's event loop running?)");
  }
  return theirs;
}

int OpenDomainChannelCount() { return g_open_pumps.load(); }

}  // namespace warren
