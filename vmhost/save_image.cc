#include "vmhost/save_image.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <vector>

#include "vmhost/migration_stream.h"

namespace warren {
namespace {

// The offsets of the header's fields (virQEMUSaveHeader: no padding, every field a u32).
constexpr size_t kMagicBytes = 16;
constexpr size_t kVersionAt = kMagicBytes;
constexpr size_t kDataLenAt = kVersionAt + 4;
constexpr size_t kWasRunningAt = kDataLenAt + 4;
constexpr size_t kFormatAt = kWasRunningAt + 4;
constexpr size_t kCookieOffsetAt = kFormatAt + 4;
constexpr size_t kUnusedAt = kCookieOffsetAt + 4;
static_assert(kUnusedAt + 14 * 4 == kSaveImageHeaderBytes);
static_assert(kSaveImageMagic.size() == kMagicBytes &&
              kSaveImagePartialMagic.size() == kMagicBytes);

// QEMU's migration stream starts with QEMU_VM_FILE_MAGIC.
constexpr std::string_view kQemuStreamMagic = "QEVM";

// Bytes per sendfile or read/write round: big enough that a pipe, not the syscalls, sets the
// pace; small enough that the fallback's buffer is no burden.
constexpr size_t kChunkBytes = 1 << 20;
constexpr size_t kFallbackBufferBytes = 256 * 1024;

// libvirt's names for the format field (qemuSaveCompression), for the error message.
std::string FormatName(uint32_t format) {
  static constexpr std::array<std::string_view, 5> kNames = {"raw", "gzip", "bzip2", "xz", "lzop"};
  if (format < kNames.size()) return std::string(kNames[format]);
  return "unknown format " + std::to_string(format);
}

uint32_t GetU32(const char* at) {
  uint32_t v;
  std::memcpy(&v, at, sizeof(v));
  return v;
}

void PutU32(std::string* out, size_t at, uint32_t v) {
  std::memcpy(out->data() + at, &v, sizeof(v));
}

Status Corrupt(std::string what) { return Internal("save image: " + what); }

std::string Errno(int err) { return std::strerror(err); }

// Waits until `fd` is ready for `events` (a non-blocking fd that said EAGAIN).
Status WaitReady(int fd, short events) {
  pollfd p{fd, events, 0};
  while (poll(&p, 1, -1) < 0) {
    if (errno != EINTR) return Internal("poll: " + Errno(errno));
  }
  return Status::Ok();
}

// Reads up to `n` bytes, fewer only at the end of the input. Retries EINTR; waits out EAGAIN.
Result<size_t> ReadUpTo(int fd, char* buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r == 0) {
      break;
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      WARREN_RETURN_IF_ERROR(WaitReady(fd, POLLIN));
    } else {
      return Internal("reading save image: " + Errno(errno));
    }
  }
  return got;
}

bool AllZero(std::string_view bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](char c) { return c == '\0'; });
}

// Keeps SIGPIPE from this thread's writes for its lifetime: a reader that goes away makes
// them fail with EPIPE instead of killing a process that has not ignored the signal. The
// signal a failed write raised while blocked is taken back before the mask is restored. A
// SIGPIPE pending before is left alone.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    was_pending_ = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~ScopedSigpipeBlock() {
    if (saw_epipe_ && !was_pending_) {
      const timespec now{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &now) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

  void SawEpipe() { saw_epipe_ = true; }

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool was_pending_ = false;
  bool saw_epipe_ = false;
};

Status WriteFailed(int err, uint64_t written, ScopedSigpipeBlock* guard) {
  if (err == EPIPE) {
    guard->SawEpipe();
    return Unavailable("the reader of the restore stream went away after " +
                       std::to_string(written) + " bytes");
  }
  return Unavailable("writing the restore stream after " + std::to_string(written) +
                     " bytes: " + Errno(err));
}

// Writes all of `bytes`, whatever short writes, EINTR and EAGAIN come in between.
Status WriteAll(int fd, std::string_view bytes, uint64_t* written, ScopedSigpipeBlock* guard) {
  while (!bytes.empty()) {
    ssize_t w = write(fd, bytes.data(), bytes.size());
    if (w >= 0) {
      bytes.remove_prefix(static_cast<size_t>(w));
      *written += static_cast<uint64_t>(w);
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      WARREN_RETURN_IF_ERROR(WaitReady(fd, POLLOUT));
    } else {
      return WriteFailed(errno, *written, guard);
    }
  }
  return Status::Ok();
}

Status CheckEncodable(const SaveImageHeader& h) {
  // What ReadSaveImageHeader accepts is all this writes: a header it would refuse is a bug.
  if (h.version != kSaveImageVersion || h.format != kSaveImageFormatRaw) {
    return InvalidArgument("save image: only version " + std::to_string(kSaveImageVersion) +
                           " raw images are written");
  }
  if (h.domain_xml.empty()) return InvalidArgument("save image: the domain XML is empty");
  if (h.domain_xml.find('\0') != std::string::npos ||
      h.cookie_xml.find('\0') != std::string::npos) {
    return InvalidArgument("save image: the domain XML or cookie holds a NUL");
  }
  const uint64_t data = h.domain_xml.size() + 1 +
                        (h.cookie_xml.empty() ? 0 : h.cookie_xml.size() + 1) + kSaveImagePadding;
  if (data > kMaxSaveImageDataBytes) {
    return InvalidArgument("save image: the domain XML and cookie take " + std::to_string(data) +
                           " bytes, over the " + std::to_string(kMaxSaveImageDataBytes) +
                           " a header may hold");
  }
  return Status::Ok();
}

}  // namespace

Result<SaveImageHeader> ReadSaveImageHeader(int fd) {
  std::string head(kSaveImageHeaderBytes, '\0');
  WARREN_ASSIGN_OR_RETURN(size_t got, ReadUpTo(fd, head.data(), head.size()));
  if (got < head.size()) {
    return Corrupt("ends inside its " + std::to_string(kSaveImageHeaderBytes) +
                   "-byte header (after " + std::to_string(got) + " bytes)");
  }
  const std::string_view magic(head.data(), kMagicBytes);
  if (magic == kSaveImagePartialMagic) {
    return Corrupt("incomplete (libvirt never finished writing it: magic " +
                   std::string(kSaveImagePartialMagic) + ")");
  }
  if (magic != kSaveImageMagic) return Corrupt("not a libvirt QEMU save image (wrong magic)");

  SaveImageHeader h;
  h.version = GetU32(head.data() + kVersionAt);
  if (h.version != kSaveImageVersion) {
    // A byte-swapped header (another endianness) lands here too: libvirt would swap it, but
    // our files are written on this host.
    return Corrupt("version " + std::to_string(h.version) + " is not supported (warren reads " +
                   std::to_string(kSaveImageVersion) + ", what libvirt 9.0 writes)");
  }
  const uint32_t data_len = GetU32(head.data() + kDataLenAt);
  const uint32_t was_running = GetU32(head.data() + kWasRunningAt);
  h.format = GetU32(head.data() + kFormatAt);
  const uint32_t cookie_offset = GetU32(head.data() + kCookieOffsetAt);
  if (was_running > 1) {
    return Corrupt("was_running is " + std::to_string(was_running) + ", not 0 or 1");
  }
  h.was_running = was_running == 1;
  if (h.format != kSaveImageFormatRaw) {
    return Corrupt("compressed (" + FormatName(h.format) +
                   "); only uncompressed (raw) images are supported");
  }
  if (!AllZero(std::string_view(head).substr(kUnusedAt))) {
    return Corrupt("its unused header fields are not zero");
  }
  if (data_len == 0 || data_len > kMaxSaveImageDataBytes) {
    return Corrupt("data length " + std::to_string(data_len) + " is out of range (1 to " +
                   std::to_string(kMaxSaveImageDataBytes) + ")");
  }
  if (cookie_offset > data_len) {
    return Corrupt("cookie offset " + std::to_string(cookie_offset) + " is past the " +
                   std::to_string(data_len) + " bytes of data");
  }

  std::string data(data_len, '\0');
  WARREN_ASSIGN_OR_RETURN(got, ReadUpTo(fd, data.data(), data.size()));
  if (got < data.size()) {
    return Corrupt("ends inside its XML data (" + std::to_string(got) + " of " +
                   std::to_string(data_len) + " bytes)");
  }
  const std::string_view all(data);
  // libvirt reads the XML as the C string in the first cookieOffset bytes (all of the data
  // without a cookie), the cookie as the C string after it; it writes each right after the
  // other, padding only at the end.
  const size_t xml_end = all.substr(0, cookie_offset == 0 ? data_len : cookie_offset).find('\0');
  if (xml_end == std::string_view::npos) return Corrupt("the domain XML has no NUL");
  if (xml_end == 0) return Corrupt("the domain XML is empty");
  h.domain_xml.assign(all.substr(0, xml_end));
  size_t padding_at = xml_end + 1;
  if (cookie_offset != 0) {
    if (cookie_offset != xml_end + 1) {
      return Corrupt("cookie offset " + std::to_string(cookie_offset) +
                     " does not follow the domain XML (" + std::to_string(xml_end) + " bytes)");
    }
    const size_t cookie_end = all.find('\0', cookie_offset);
    if (cookie_end == std::string_view::npos) return Corrupt("the cookie has no NUL");
    h.cookie_xml.assign(all.substr(cookie_offset, cookie_end - cookie_offset));
    padding_at = cookie_end + 1;
  }
  if (!AllZero(all.substr(padding_at))) {
    return Corrupt("non-zero bytes in the padding after the XML");
  }
  h.stream_offset = kSaveImageHeaderBytes + uint64_t{data_len};
  return h;
}

std::string EncodeSaveImageHeader(const SaveImageHeader& header) {
  const bool cookie = !header.cookie_xml.empty();
  const size_t xml_len = header.domain_xml.size() + 1;
  const size_t len = xml_len + (cookie ? header.cookie_xml.size() + 1 : 0);
  std::string out(kSaveImageHeaderBytes, '\0');
  out.replace(0, kMagicBytes, kSaveImageMagic);
  PutU32(&out, kVersionAt, header.version);
  PutU32(&out, kDataLenAt, static_cast<uint32_t>(len + kSaveImagePadding));
  PutU32(&out, kWasRunningAt, header.was_running ? 1 : 0);
  PutU32(&out, kFormatAt, header.format);
  PutU32(&out, kCookieOffsetAt, cookie ? static_cast<uint32_t>(xml_len) : 0);
  out.reserve(kSaveImageHeaderBytes + len + kSaveImagePadding);
  out += header.domain_xml;
  out += '\0';
  if (cookie) {
    out += header.cookie_xml;
    out += '\0';
  }
  out.append(kSaveImagePadding, '\0');
  return out;
}

Result<std::string> EncodeSaveImageHeaderInPlace(const SaveImageHeader& header) {
  WARREN_RETURN_IF_ERROR(CheckEncodable(header));
  if (header.stream_offset <= kSaveImageHeaderBytes) {
    return InvalidArgument("save image: the template's stream offset is unknown");
  }
  const uint64_t room = header.stream_offset - kSaveImageHeaderBytes;
  std::string out = EncodeSaveImageHeader(header);
  const uint64_t used = out.size() - kSaveImageHeaderBytes - kSaveImagePadding;
  if (used > room) {
    return InvalidArgument("save image: the new domain XML and cookie take " +
                           std::to_string(used) + " bytes, over the template's " +
                           std::to_string(room));
  }
  PutU32(&out, kDataLenAt, static_cast<uint32_t>(room));
  out.resize(static_cast<size_t>(header.stream_offset), '\0');
  return out;
}

Result<uint64_t> SaveImageHeaderLength(std::string_view fixed) {
  if (fixed.size() < kSaveImageHeaderBytes) return ParseSaveImageHeader(fixed).status();
  const uint32_t data_len = GetU32(fixed.data() + kDataLenAt);
  if (fixed.substr(0, kMagicBytes) != kSaveImageMagic ||
      GetU32(fixed.data() + kVersionAt) != kSaveImageVersion || data_len == 0 ||
      data_len > kMaxSaveImageDataBytes) {
    return ParseSaveImageHeader(fixed).status();  // its refusal, said its way
  }
  return kSaveImageHeaderBytes + uint64_t{data_len};
}

Result<SaveImageHeader> ParseSaveImageHeader(std::string_view bytes) {
  const int fd = memfd_create("warren-save-header", MFD_CLOEXEC);
  if (fd < 0) return Internal("save image: memfd_create: " + Errno(errno));
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + off, bytes.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      close(fd);
      return Internal("save image: writing a memfd: " + Errno(e));
    }
    off += static_cast<size_t>(n);
  }
  Result<SaveImageHeader> h = lseek(fd, 0, SEEK_SET) == 0
                                  ? ReadSaveImageHeader(fd)
                                  : Result<SaveImageHeader>(Internal("save image: lseek"));
  close(fd);
  return h;
}

namespace {

// Sends bytes [from, to) of regular file `fd` to `out_fd`, by offset (the fd's position is
// never used, so calls may share it). sendfile moves them in the kernel into a file, a pipe
// or a socket; a target it refuses before any byte moved falls back to read and write.
Status SendRange(int fd, uint64_t from, uint64_t to, int out_fd, uint64_t* written,
                 ScopedSigpipeBlock* guard, const std::string& what) {
  off_t at = static_cast<off_t>(from);
  bool use_sendfile = true;
  std::vector<char> buffer;
  while (static_cast<uint64_t>(at) < to) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(to - at, kChunkBytes));
    if (use_sendfile) {
      ssize_t n = sendfile(out_fd, fd, &at, want);
      if (n > 0) {
        *written += static_cast<uint64_t>(n);
        continue;
      }
      if (n == 0) break;  // the file ended early
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        WARREN_RETURN_IF_ERROR(WaitReady(out_fd, POLLOUT));
        continue;
      }
      if ((errno == EINVAL || errno == ENOSYS) && static_cast<uint64_t>(at) == from) {
        use_sendfile = false;
        continue;
      }
      // EPIPE, or EIO and friends from either side: sendfile does not say which, and a
      // read error of the stream is as fatal as a write error.
      return WriteFailed(errno, *written, guard);
    }
    if (buffer.empty()) buffer.resize(kFallbackBufferBytes);
    ssize_t n = pread(fd, buffer.data(), std::min(want, buffer.size()), at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Internal(what + ": read at " + std::to_string(at) + ": " + Errno(errno));
    if (n == 0) break;
    WARREN_RETURN_IF_ERROR(
        WriteAll(out_fd, std::string_view(buffer.data(), static_cast<size_t>(n)), written, guard));
    at += n;
  }
  if (static_cast<uint64_t>(at) < to) {
    return Internal(what + ": ended at byte " + std::to_string(at) + " of the " +
                    std::to_string(to) + " it had when the copy began");
  }
  return Status::Ok();
}

// The plan for bytes [start, end) of `fd` without their zero pages (migration_stream.h),
// read through a private read-only mapping; the reason when there is none.
Result<ZeroPagePlan> PlanStream(int fd, uint64_t start, uint64_t end) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t base = start - start % page;
  const size_t length = static_cast<size_t>(end - base);
  void* map = mmap(nullptr, length, PROT_READ, MAP_PRIVATE, fd, static_cast<off_t>(base));
  if (map == MAP_FAILED) return Internal("mapping the stream: " + Errno(errno));
  madvise(map, length, MADV_SEQUENTIAL);
  Result<ZeroPagePlan> plan = PlanWithoutZeroPages(
      std::string_view(static_cast<const char*>(map) + (start - base), end - start));
  munmap(map, length);
  return plan;
}

// Writes `head`, then the migration stream in regular file `stream_fd` from offset `start`
// to its end (checked to begin with "QEVM") without its guest RAM's zero pages when its
// layout is known (else whole); `what` names the file in errors.
Status CopyStream(int stream_fd, uint64_t start, std::string_view head, int out_fd,
                  const std::string& what, StreamCopyStats* stats) {
  struct stat st {};
  if (fstat(stream_fd, &st) != 0) return Internal(what + ": fstat: " + Errno(errno));
  if (!S_ISREG(st.st_mode)) return Internal(what + ": not a regular file");
  const uint64_t end = static_cast<uint64_t>(st.st_size);
  if (end < start + kQemuStreamMagic.size()) {
    return Internal(what + ": no migration stream at offset " + std::to_string(start) + " of its " +
                    std::to_string(end) + " bytes");
  }
  // An offset that is not where the template's data ends would splice the wrong bytes
  // after the new header: libvirt would take them for QEMU's and the restore fail late.
  char magic[4];
  ssize_t r;
  do {
    r = pread(stream_fd, magic, sizeof(magic), static_cast<off_t>(start));
  } while (r < 0 && errno == EINTR);
  if (r != static_cast<ssize_t>(sizeof(magic)) ||
      std::string_view(magic, sizeof(magic)) != kQemuStreamMagic) {
    return Internal(what + ": no QEMU migration stream (\"QEVM\") at offset " +
                    std::to_string(start));
  }
  ScopedSigpipeBlock guard;
  uint64_t written = 0;
  WARREN_RETURN_IF_ERROR(WriteAll(out_fd, head, &written, &guard));
  // Planned once the header is out (~20 ms for a debian template): libvirt reads the header
  // and starts QEMU meanwhile, which reads the stream only then.
  Result<ZeroPagePlan> plan = PlanStream(stream_fd, start, end);
  if (!plan.ok()) {
    if (stats != nullptr) stats->whole_because = plan.status().message();
    return SendRange(stream_fd, start, end, out_fd, &written, &guard, what);
  }
  for (const StreamPiece& piece : plan->pieces) {
    if (!piece.bytes.empty()) {
      WARREN_RETURN_IF_ERROR(WriteAll(out_fd, piece.bytes, &written, &guard));
      continue;
    }
    WARREN_RETURN_IF_ERROR(SendRange(stream_fd, start + piece.offset,
                                     start + piece.offset + piece.length, out_fd, &written, &guard,
                                     what));
  }
  if (stats != nullptr) {
    stats->zero_pages_dropped = plan->dropped_records;
    stats->bytes_dropped = plan->dropped_bytes;
  }
  return Status::Ok();
}

}  // namespace

Status WriteRewrittenSave(int template_fd, const SaveImageHeader& header, int out_fd,
                          StreamCopyStats* stats) {
  WARREN_RETURN_IF_ERROR(CheckEncodable(header));
  // A template's stream follows its own header.
  if (header.stream_offset < kSaveImageHeaderBytes) {
    return Internal("save template: no migration stream at offset " +
                    std::to_string(header.stream_offset));
  }
  return CopyStream(template_fd, header.stream_offset, EncodeSaveImageHeader(header), out_fd,
                    "save template", stats);
}

Status WriteStreamAsSave(const SaveImageHeader& header, int stream_fd, int out_fd,
                         StreamCopyStats* stats) {
  WARREN_RETURN_IF_ERROR(CheckEncodable(header));
  return CopyStream(stream_fd, 0, EncodeSaveImageHeader(header), out_fd, "memory stream", stats);
}

}  // namespace warren
