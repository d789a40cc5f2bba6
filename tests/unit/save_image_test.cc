// libvirt's save image header (vmhost/save_image.h): synthetic images built here (round
// trips, every refusal, a rewrite streamed through a pipe with the memory bytes intact) and
// the header of a real libvirt 9.0 save (tests/golden/libvirt/save_header_tiny.bin).
#include "vmhost/save_image.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include "tests/unit/golden_file.h"
#include "tests/unit/migration_stream_builder.h"

namespace warren {
namespace {

// An fd closed at scope exit.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    reset(o.release());
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

// An anonymous regular file holding `bytes`, positioned at its start.
Fd MemFile(const std::string& bytes) {
  Fd fd(memfd_create("save_image_test", MFD_CLOEXEC));
  EXPECT_GE(fd.get(), 0);
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (w <= 0) break;
    done += static_cast<size_t>(w);
  }
  EXPECT_EQ(done, bytes.size());
  lseek(fd.get(), 0, SEEK_SET);
  return fd;
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t r = read(fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

Result<SaveImageHeader> ReadBytes(const std::string& bytes) {
  Fd fd = MemFile(bytes);
  return ReadSaveImageHeader(fd.get());
}

const char kXml[] =
    "<domain type='qemu' id='3'>\n  <name>warren-tmpl</name>\n"
    "  <uuid>3f0c5a57-1b5e-4d55-a7c1-0c0ffee0c0de</uuid>\n</domain>\n";
const char kCookie[] = "<cookie>\n  <slirpHelper/>\n</cookie>\n";

SaveImageHeader Header(std::string xml = kXml, std::string cookie = kCookie) {
  SaveImageHeader h;
  h.domain_xml = std::move(xml);
  h.cookie_xml = std::move(cookie);
  return h;
}

// A migration stream as QEMU starts one, then `size` bytes that are not zeros or a pattern a
// misplaced offset could reproduce.
std::string Stream(size_t size) {
  std::string s = "QEVM";
  s += std::string("\0\0\0\3", 4);
  std::mt19937 rng(20261201);
  while (s.size() < size) s += static_cast<char>(rng());
  return s;
}

void SetU32(std::string* bytes, size_t at, uint32_t v) {
  std::memcpy(bytes->data() + at, &v, sizeof(v));
}

constexpr size_t kDataLenAt = 20;
constexpr size_t kWasRunningAt = 24;
constexpr size_t kFormatAt = 28;
constexpr size_t kCookieOffsetAt = 32;

TEST(SaveImageTest, EncodesWhatLibvirtWrites) {
  const std::string bytes = EncodeSaveImageHeader(Header());
  const size_t xml_len = sizeof(kXml);  // with its NUL
  const size_t data_len = xml_len + sizeof(kCookie) + 64 * 1024;
  ASSERT_EQ(bytes.size(), 92 + data_len);
  EXPECT_EQ(bytes.substr(0, 16), "LibvirtQemudSave");
  uint32_t field[5];
  std::memcpy(field, bytes.data() + 16, sizeof(field));
  EXPECT_EQ(field[0], 2u);        // version
  EXPECT_EQ(field[1], data_len);  // data_len: XML, cookie and 64 KiB of zeros
  EXPECT_EQ(field[2], 1u);        // was_running
  EXPECT_EQ(field[3], 0u);        // raw
  EXPECT_EQ(field[4], xml_len);   // the cookie right after the XML's NUL
  EXPECT_EQ(bytes.substr(92, xml_len), std::string(kXml, xml_len));
  EXPECT_EQ(bytes.substr(92 + xml_len, sizeof(kCookie)), std::string(kCookie, sizeof(kCookie)));
  EXPECT_EQ(bytes.find_first_not_of('\0', 92 + xml_len + sizeof(kCookie)), std::string::npos);
}

TEST(SaveImageTest, RoundTrips) {
  for (const SaveImageHeader& h : {Header(), Header(kXml, "")}) {
    SaveImageHeader in = h;
    in.was_running = h.cookie_xml.empty();  // both values
    const std::string bytes = EncodeSaveImageHeader(in);
    Result<SaveImageHeader> out = ReadBytes(bytes + Stream(100));
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(out->domain_xml, in.domain_xml);
    EXPECT_EQ(out->cookie_xml, in.cookie_xml);
    EXPECT_EQ(out->version, 2u);
    EXPECT_EQ(out->format, 0u);
    EXPECT_EQ(out->was_running, in.was_running);
    EXPECT_EQ(out->stream_offset, bytes.size());
    EXPECT_EQ(EncodeSaveImageHeader(*out), bytes);
  }
  // No cookie: cookieOffset stays 0 and the XML runs into the padding.
  std::string bytes = EncodeSaveImageHeader(Header(kXml, ""));
  uint32_t cookie_offset;
  std::memcpy(&cookie_offset, bytes.data() + kCookieOffsetAt, 4);
  EXPECT_EQ(cookie_offset, 0u);
}

// A remote host's restore (libvirt_host_remote_templates.cc) overwrites the start of a copy
// of the template: the new header must take exactly the template's room, so the stream stays
// where it was, and read back as the new XML.
TEST(SaveImageTest, EncodesInPlaceInTheTemplatesRoom) {
  const std::string stream = Stream(1000);
  const std::string original = EncodeSaveImageHeader(Header()) + stream;
  Result<SaveImageHeader> tmpl = ParseSaveImageHeader(original);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().ToString();
  EXPECT_EQ(tmpl->domain_xml, kXml);
  for (const std::string& xml :
       {std::string(kXml) + std::string(3000, ' '), std::string("<domain/>")}) {
    SaveImageHeader rewritten = *tmpl;
    rewritten.domain_xml = xml;
    Result<std::string> head = EncodeSaveImageHeaderInPlace(rewritten);
    ASSERT_TRUE(head.ok()) << head.status().ToString();
    EXPECT_EQ(head->size(), tmpl->stream_offset) << "longer or shorter, the same room";
    const std::string copy = *head + original.substr(head->size());
    Result<SaveImageHeader> back = ParseSaveImageHeader(copy);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->domain_xml, xml);
    EXPECT_EQ(back->cookie_xml, kCookie);
    EXPECT_EQ(back->stream_offset, tmpl->stream_offset);
    EXPECT_EQ(copy.substr(back->stream_offset), stream);
  }
  // An XML beyond the room is refused, as is a header whose room is unknown.
  SaveImageHeader huge = *tmpl;
  huge.domain_xml = std::string(kXml) + std::string(kSaveImagePadding + 1, ' ');
  EXPECT_EQ(EncodeSaveImageHeaderInPlace(huge).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(EncodeSaveImageHeaderInPlace(Header()).status().code(), Code::kInvalidArgument);
  // The fixed part alone says how far to read (a remote host's image is read that far).
  Result<uint64_t> length = SaveImageHeaderLength(original.substr(0, kSaveImageHeaderBytes));
  ASSERT_TRUE(length.ok()) << length.status().ToString();
  EXPECT_EQ(*length, tmpl->stream_offset);
  EXPECT_EQ(SaveImageHeaderLength("NotASaveImage!!!").status().code(), Code::kInternal);
  EXPECT_EQ(SaveImageHeaderLength("NotASaveImage!!!" + original.substr(16, 76)).status().code(),
            Code::kInternal);
  // Bytes that are no save image get ReadSaveImageHeader's refusals.
  EXPECT_EQ(ParseSaveImageHeader("NotASaveImage!!!").status().code(), Code::kInternal);
  EXPECT_EQ(ParseSaveImageHeader(original.substr(0, 50)).status().code(), Code::kInternal);
}

TEST(SaveImageTest, ReadsFromThePositionAndStopsAtTheStream) {
  const std::string bytes = EncodeSaveImageHeader(Header());
  const std::string stream = Stream(1000);
  Fd fd = MemFile("junk" + bytes + stream);
  lseek(fd.get(), 4, SEEK_SET);
  Result<SaveImageHeader> h = ReadSaveImageHeader(fd.get());
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->stream_offset, bytes.size());  // counted from the magic
  EXPECT_EQ(ReadAll(fd.get()), stream);
}

TEST(SaveImageTest, RefusesATruncatedImage) {
  const std::string bytes = EncodeSaveImageHeader(Header());
  const size_t xml_at = 92;
  for (size_t cut :
       {size_t{0}, size_t{10}, size_t{16}, size_t{40}, size_t{91}, size_t{92}, xml_at + 20,
        xml_at + sizeof(kXml), xml_at + sizeof(kXml) + 10, bytes.size() - 1000, bytes.size() - 1}) {
    Result<SaveImageHeader> h = ReadBytes(bytes.substr(0, cut));
    ASSERT_FALSE(h.ok()) << "cut at " << cut;
    EXPECT_EQ(h.status().code(), Code::kInternal) << cut;
    EXPECT_NE(h.status().message().find("ends inside"), std::string::npos)
        << cut << ": " << h.status().message();
  }
  // Through a pipe too: the writer closes early.
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  Fd r(p[0]);
  Fd w(p[1]);
  ASSERT_EQ(write(w.get(), bytes.data(), 1000), 1000);
  w.reset();
  Result<SaveImageHeader> h = ReadSaveImageHeader(r.get());
  EXPECT_EQ(h.status().code(), Code::kInternal);
  EXPECT_NE(h.status().message().find("ends inside its XML data (908 of"), std::string::npos)
      << h.status().message();
}

void ExpectRefused(const std::string& bytes, const std::string& says) {
  Result<SaveImageHeader> h = ReadBytes(bytes);
  ASSERT_FALSE(h.ok()) << says;
  EXPECT_EQ(h.status().code(), Code::kInternal);
  EXPECT_NE(h.status().message().find(says), std::string::npos) << h.status().message();
}

TEST(SaveImageTest, RefusesForeignAndIncompleteImages) {
  const std::string good = EncodeSaveImageHeader(Header()) + Stream(100);
  std::string bytes = good;
  bytes.replace(0, 16, "QFI\xfb-not-libvirt");
  ExpectRefused(bytes, "wrong magic");
  bytes = good;
  bytes.replace(0, 16, "LibvirtQemudPart");
  ExpectRefused(bytes, "incomplete");
  ExpectRefused(std::string(200, '\0'), "wrong magic");
}

TEST(SaveImageTest, RefusesOtherVersionsAndCompression) {
  const std::string good = EncodeSaveImageHeader(Header()) + Stream(100);
  std::string bytes = good;
  SetU32(&bytes, 16, 3);
  ExpectRefused(bytes, "version 3 is not supported");
  SetU32(&bytes, 16, 1);
  ExpectRefused(bytes, "version 1 is not supported");
  SetU32(&bytes, 16, 0x02000000);  // version 2 from a host of the other byte order
  ExpectRefused(bytes, "version 33554432");
  bytes = good;
  SetU32(&bytes, kFormatAt, 1);
  ExpectRefused(bytes, "compressed (gzip)");
  SetU32(&bytes, kFormatAt, 4);
  ExpectRefused(bytes, "compressed (lzop)");
  SetU32(&bytes, kFormatAt, 9);
  ExpectRefused(bytes, "unknown format 9");
}

TEST(SaveImageTest, RefusesBadLengthsAndOffsets) {
  const std::string good = EncodeSaveImageHeader(Header()) + Stream(100);
  const uint32_t xml_len = sizeof(kXml);
  std::string bytes = good;
  SetU32(&bytes, kDataLenAt, 0);
  ExpectRefused(bytes, "data length 0 is out of range");
  SetU32(&bytes, kDataLenAt, (16 << 20) + 1);
  ExpectRefused(bytes, "data length 16777217 is out of range");
  SetU32(&bytes, kDataLenAt, 0xffffffff);
  ExpectRefused(bytes, "out of range");

  bytes = good;
  SetU32(&bytes, kCookieOffsetAt, 1 << 20);
  ExpectRefused(bytes, "cookie offset 1048576 is past");
  SetU32(&bytes, kCookieOffsetAt, xml_len - 1);  // points at the XML's NUL
  ExpectRefused(bytes, "no NUL");
  SetU32(&bytes, kCookieOffsetAt, xml_len + 3);  // inside the cookie
  ExpectRefused(bytes, "does not follow the domain XML");

  bytes = good;
  SetU32(&bytes, kWasRunningAt, 7);
  ExpectRefused(bytes, "was_running is 7");
  bytes = good;
  bytes[92 - 4] = 1;  // the last unused field
  ExpectRefused(bytes, "unused header fields");
}

TEST(SaveImageTest, RefusesMissingNuls) {
  // The XML fills all of data_len with no NUL.
  std::string bytes = EncodeSaveImageHeader(Header(kXml, ""));
  const uint32_t data_len = static_cast<uint32_t>(bytes.size() - 92);
  std::memset(bytes.data() + 92, 'x', data_len);
  ExpectRefused(bytes, "the domain XML has no NUL");
  // The cookie runs to the end of the data.
  bytes = EncodeSaveImageHeader(Header());
  std::memset(bytes.data() + 92 + sizeof(kXml), 'c', bytes.size() - 92 - sizeof(kXml));
  ExpectRefused(bytes, "the cookie has no NUL");
  // Something after the terminated XML where libvirt writes zeros.
  bytes = EncodeSaveImageHeader(Header());
  bytes[bytes.size() - 10] = '<';
  ExpectRefused(bytes, "padding");
  // An empty XML.
  bytes = EncodeSaveImageHeader(Header(kXml, ""));
  bytes[92] = '\0';
  ExpectRefused(bytes, "empty");
}

// What a rewrite writes through a pipe: the new header, then the template's stream unchanged.
struct Received {
  Result<SaveImageHeader> header = Internal("not read");
  std::string stream;
};

Received RewriteThroughPipe(const std::string& template_bytes, const SaveImageHeader& header,
                            Status* status, bool nonblocking = false) {
  Fd tmpl = MemFile(template_bytes);
  int p[2];
  EXPECT_EQ(pipe2(p, O_CLOEXEC), 0);
  Fd r(p[0]);
  Fd w(p[1]);
  if (nonblocking) fcntl(w.get(), F_SETFL, O_NONBLOCK);
  std::thread writer([&] {
    *status = WriteRewrittenSave(tmpl.get(), header, w.get());
    w.reset();
  });
  Received got;
  got.header = ReadSaveImageHeader(r.get());
  got.stream = ReadAll(r.get());
  writer.join();
  return got;
}

TEST(SaveImageTest, RewritesTheXmlAndKeepsTheStream) {
  const std::string stream = Stream(3 << 20);
  const std::string tmpl = EncodeSaveImageHeader(Header()) + stream;
  Result<SaveImageHeader> h = ReadBytes(tmpl);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  for (const std::string& xml :
       {std::string(kXml).replace(30, 4, std::string(200000, 'L')),  // past the 64 KiB padding
        std::string("<domain><name>s</name></domain>"), std::string(kXml)}) {
    for (bool nonblocking : {false, true}) {
      SaveImageHeader next = *h;
      next.domain_xml = xml;
      Status st;
      Received got = RewriteThroughPipe(tmpl, next, &st, nonblocking);
      ASSERT_TRUE(st.ok()) << st.ToString();
      ASSERT_TRUE(got.header.ok()) << got.header.status().ToString();
      EXPECT_EQ(got.header->domain_xml, xml);
      EXPECT_EQ(got.header->cookie_xml, kCookie);
      EXPECT_TRUE(got.header->was_running);
      EXPECT_EQ(got.stream.size(), stream.size());
      EXPECT_TRUE(got.stream == stream) << "the memory stream changed";
    }
  }
}

TEST(SaveImageTest, RewritesIntoAFileWhereSendfileWillNot) {
  const std::string stream = Stream(600000);
  const std::string tmpl = EncodeSaveImageHeader(Header()) + stream;
  Result<SaveImageHeader> h = ReadBytes(tmpl);
  ASSERT_TRUE(h.ok());
  h->domain_xml = "<domain><name>copy</name></domain>";
  Fd t = MemFile(tmpl);
  Fd out = MemFile("");
  // sendfile refuses a file opened for appending (EINVAL): read and write take over.
  ASSERT_EQ(fcntl(out.get(), F_SETFL, O_APPEND), 0);
  Status st = WriteRewrittenSave(t.get(), *h, out.get());
  ASSERT_TRUE(st.ok()) << st.ToString();
  lseek(out.get(), 0, SEEK_SET);
  EXPECT_EQ(ReadAll(out.get()), EncodeSaveImageHeader(*h) + stream);
  // The template's position was never used: it is where MemFile left it.
  EXPECT_EQ(lseek(t.get(), 0, SEEK_CUR), 0);
}

TEST(SaveImageTest, ARewriteRefusesBadInput) {
  const std::string tmpl = EncodeSaveImageHeader(Header()) + Stream(5000);
  Result<SaveImageHeader> h = ReadBytes(tmpl);
  ASSERT_TRUE(h.ok());
  Fd t = MemFile(tmpl);
  Fd out = MemFile("");
  SaveImageHeader bad = *h;
  bad.domain_xml = std::string("<domain>\0</domain>", 18);
  EXPECT_EQ(WriteRewrittenSave(t.get(), bad, out.get()).code(), Code::kInvalidArgument);
  bad.domain_xml = "";
  EXPECT_EQ(WriteRewrittenSave(t.get(), bad, out.get()).code(), Code::kInvalidArgument);
  bad.domain_xml = std::string(16 << 20, 'x');
  EXPECT_EQ(WriteRewrittenSave(t.get(), bad, out.get()).code(), Code::kInvalidArgument);
  bad = *h;
  bad.format = 1;
  EXPECT_EQ(WriteRewrittenSave(t.get(), bad, out.get()).code(), Code::kInvalidArgument);
  bad = *h;
  bad.version = 3;
  EXPECT_EQ(WriteRewrittenSave(t.get(), bad, out.get()).code(), Code::kInvalidArgument);
  // A stream offset that is not where the stream starts, or past the end.
  bad = *h;
  bad.stream_offset += 1;
  Status st = WriteRewrittenSave(t.get(), bad, out.get());
  EXPECT_EQ(st.code(), Code::kInternal);
  EXPECT_NE(st.message().find("QEVM"), std::string::npos) << st.message();
  bad.stream_offset = tmpl.size() + 10;
  EXPECT_EQ(WriteRewrittenSave(t.get(), bad, out.get()).code(), Code::kInternal);
  // A template that is no regular file.
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  Fd pr(p[0]);
  Fd pw(p[1]);
  EXPECT_EQ(WriteRewrittenSave(pr.get(), *h, out.get()).code(), Code::kInternal);
  // Nothing was written by any refusal.
  EXPECT_EQ(lseek(out.get(), 0, SEEK_END), 0);
}

// A live copy's memory: QEMU's stream alone in a file (qemu_memory_migration.h), restored
// behind a header written for it, as libvirt would have saved it.
TEST(SaveImageTest, PutsAHeaderBeforeABareStream) {
  const std::string stream = Stream(2 << 20);
  Fd file = MemFile(stream);
  Fd out = MemFile("");
  SaveImageHeader h = Header();
  h.cookie_xml = "";
  ASSERT_TRUE(WriteStreamAsSave(h, file.get(), out.get()).ok());
  lseek(out.get(), 0, SEEK_SET);
  const std::string written = ReadAll(out.get());
  EXPECT_EQ(written, EncodeSaveImageHeader(h) + stream);
  Result<SaveImageHeader> back = ReadBytes(written);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->domain_xml, h.domain_xml);
  EXPECT_EQ(back->cookie_xml, "");
  EXPECT_EQ(back->stream_offset, EncodeSaveImageHeader(h).size());

  // Refused, nothing written: a file that is not QEMU's stream, an empty one, a bad XML.
  Fd foreign = MemFile("LibvirtQemudSave" + stream);
  Fd empty = MemFile("");
  Fd none = MemFile("");
  Status st = WriteStreamAsSave(h, foreign.get(), none.get());
  EXPECT_EQ(st.code(), Code::kInternal);
  EXPECT_NE(st.message().find("QEVM"), std::string::npos) << st.message();
  EXPECT_EQ(WriteStreamAsSave(h, empty.get(), none.get()).code(), Code::kInternal);
  SaveImageHeader bad = h;
  bad.domain_xml = "";
  EXPECT_EQ(WriteStreamAsSave(bad, file.get(), none.get()).code(), Code::kInvalidArgument);
  EXPECT_EQ(lseek(none.get(), 0, SEEK_END), 0);
}

// A stream in QEMU's layout goes without its guest RAM's zero pages (migration_stream.h), from
// a template and from a bare stream alike; one in no known layout goes whole, saying why.
TEST(SaveImageTest, SendsAStreamWithoutItsZeroPages) {
  StreamBuilder b({{"pc.ram", 4096 * StreamBuilder::kPage}, {"pc.rom", 2 * StreamBuilder::kPage}});
  for (uint64_t page = 0; page < 4096; page++) {
    if (page % 97 == 0) {
      b.Data(page == 0 ? "pc.ram" : "", page, static_cast<char>(page));
    } else {
      b.Zero(page == 0 ? "pc.ram" : "", page);
    }
  }
  b.Zero("pc.rom", 1).EndSection(0x03).EndSection().Tail("devices");
  const std::string stream = b.str();
  Result<ZeroPagePlan> plan = PlanWithoutZeroPages(stream);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  const std::string expected = Assemble(*plan, stream);
  ASSERT_LT(expected.size(), stream.size());

  SaveImageHeader h = Header();
  Fd bare = MemFile(stream);
  Fd out = MemFile("");
  StreamCopyStats stats;
  ASSERT_TRUE(WriteStreamAsSave(h, bare.get(), out.get(), &stats).ok());
  lseek(out.get(), 0, SEEK_SET);
  EXPECT_EQ(ReadAll(out.get()), EncodeSaveImageHeader(h) + expected);
  EXPECT_EQ(stats.zero_pages_dropped, 4096 - 43);
  EXPECT_EQ(stats.bytes_dropped, stream.size() - expected.size());
  EXPECT_EQ(stats.whole_because, "");

  // A template: the stream from its own offset.
  const std::string tmpl = EncodeSaveImageHeader(Header()) + stream;
  Result<SaveImageHeader> th = ReadBytes(tmpl);
  ASSERT_TRUE(th.ok());
  Fd t = MemFile(tmpl);
  Fd tout = MemFile("");
  StreamCopyStats tstats;
  ASSERT_TRUE(WriteRewrittenSave(t.get(), *th, tout.get(), &tstats).ok());
  lseek(tout.get(), 0, SEEK_SET);
  EXPECT_EQ(ReadAll(tout.get()), EncodeSaveImageHeader(*th) + expected);
  EXPECT_EQ(tstats.zero_pages_dropped, 4096 - 43);

  // Not QEMU's layout past its magic: whole, and why.
  Fd odd = MemFile(Stream(1 << 16));
  Fd out2 = MemFile("");
  StreamCopyStats ostats;
  ASSERT_TRUE(WriteStreamAsSave(h, odd.get(), out2.get(), &ostats).ok());
  lseek(out2.get(), 0, SEEK_SET);
  EXPECT_EQ(ReadAll(out2.get()), EncodeSaveImageHeader(h) + Stream(1 << 16));
  EXPECT_NE(ostats.whole_because.find("migration stream"), std::string::npos)
      << ostats.whole_because;
}

TEST(SaveImageTest, AReaderThatGoesAwayIsAnErrorNotASignal) {
  // SIGPIPE is left at its default here: a raised one would end the test binary.
  const std::string tmpl = EncodeSaveImageHeader(Header()) + Stream(2 << 20);
  Result<SaveImageHeader> h = ReadBytes(tmpl);
  ASSERT_TRUE(h.ok());
  Fd t = MemFile(tmpl);
  for (size_t read_first : {size_t{0}, size_t{200000}}) {
    int p[2];
    ASSERT_EQ(pipe(p), 0);
    Fd r(p[0]);
    Fd w(p[1]);
    Status st;
    std::thread writer([&] { st = WriteRewrittenSave(t.get(), *h, w.get()); });
    std::string got(read_first, '\0');
    size_t done = 0;
    while (done < read_first) {
      ssize_t n = read(r.get(), got.data() + done, read_first - done);
      ASSERT_GT(n, 0);
      done += static_cast<size_t>(n);
    }
    r.reset();  // libvirt gave up
    writer.join();
    EXPECT_EQ(st.code(), Code::kUnavailable) << st.ToString();
    EXPECT_NE(st.message().find("went away"), std::string::npos) << st.message();
  }
}

TEST(SaveImageTest, ATemplateThatShrinksUnderTheCopyIsReported) {
  const std::string stream = Stream(4 << 20);
  const std::string tmpl = EncodeSaveImageHeader(Header()) + stream;
  Result<SaveImageHeader> h = ReadBytes(tmpl);
  ASSERT_TRUE(h.ok());
  Fd t = MemFile(tmpl);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  Fd r(p[0]);
  Fd w(p[1]);
  Status st;
  std::thread writer([&] {
    st = WriteRewrittenSave(t.get(), *h, w.get());
    w.reset();
  });
  // The pipe holds 64 KiB, so the writer is well short of 1 MiB into the stream here.
  Result<SaveImageHeader> got = ReadSaveImageHeader(r.get());
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(ftruncate(t.get(), static_cast<off_t>(h->stream_offset + (1 << 20))), 0);
  const std::string received = ReadAll(r.get());
  writer.join();
  EXPECT_EQ(st.code(), Code::kInternal) << st.ToString();
  EXPECT_NE(st.message().find("ended at byte"), std::string::npos) << st.message();
  EXPECT_EQ(received, stream.substr(0, 1 << 20));
}

// The header and data of a real `virsh save` (libvirt 9.0, QEMU 7.2, TCG) of a tiny VM,
// without its memory stream.
TEST(SaveImageTest, ReadsAndReencodesALibvirtSave) {
  const std::string bytes = ReadGolden("libvirt/save_header_tiny.bin");
  Result<SaveImageHeader> h = ReadBytes(bytes);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(h->version, 2u);
  EXPECT_TRUE(h->was_running);
  EXPECT_EQ(h->format, 0u);
  EXPECT_EQ(h->stream_offset, bytes.size());
  EXPECT_EQ(h->domain_xml, ReadGolden("libvirt/domain_saved.xml"));
  EXPECT_EQ(h->cookie_xml.rfind("<cookie>", 0), 0u) << h->cookie_xml;
  EXPECT_TRUE(EncodeSaveImageHeader(*h) == bytes) << "re-encoding changed the bytes";
}

}  // namespace
}  // namespace warren
