// A VM's virtio-serial channel reached through libvirt (virDomainOpenChannel) instead of its
// unix socket: how warren reaches the control port of a VM on a remote host (qemu+ssh://,
// qemu+tls://), where that socket is on the other machine (docs/multi_host_transport.md).
//
// The channel is a non-blocking libvirt stream on a connection to the host: callbacks on
// libvirt's event loop thread (libvirt_events.h) move bytes between the stream and one end
// of a socket pair, and a sender thread of the channel's own writes to the stream; the
// caller gets the other end, a plain socket it can hand to libssh (SSH_OPTIONS_FD) as it
// would the local socket.
//
// Why a sender thread: the remote driver's virStreamSend does not return until the packet is
// written to the daemon connection, VIR_STREAM_NONBLOCK or not, and libvirtd stops reading a
// client connection while one of its streams has max_client_requests packets queued for a
// guest that does not drain its port (paused, hung, hostile). A send on the event loop then
// held the loop, and with it every connection's events and keepalive and every other VM's
// channel in the process, until the guest drained or the daemon dropped the connection (12 s
// of a 12 s stall in libvirt_channel_test; docs/multi_host_transport.md). So the event loop
// thread never calls a libvirt function that can wait for the daemon: it receives
// (non-blocking, which reads only what libvirt's client already queued) and does the socket
// I/O; sends, and the stream's finish or abort (calls that wait for the daemon's reply),
// happen on the sender thread. libvirt 9.0 takes a send on one thread beside a non-blocking
// receive on another, under bulk both ways (the test's `cat` echo of 4 MiB).
//
// Threads: one sender per open channel, so as many as the VMs whose control session is open
// through libvirt (one channel per VM: libvirt gives a channel to one stream at a time). It
// ends with the channel; a sender stuck in a send ends when the daemon reads again or the
// connection drops (libvirtd's keepalive closes a client it cannot reach).
//
// What it cannot fix: the daemon stops reading the WHOLE connection, so anything else on the
// stalled channel's connection (other VMs' channels, calls) would wait for the guest too. So
// LibvirtHost::DialControl opens each channel on a connection of its own (the stream holds
// a reference to it; it closes with the channel): other VMs, the host's calls, other hosts'
// connections, the event loop and lifecycle events never wait for a stalled guest.
//
// The pump:
//   - two bounded buffers (kChannelBufferBytes each way); a side is not read while the
//     buffer it fills is full, so a slow reader holds back the writer (no unbounded queue
//     of ours; the sender takes one 64 KiB chunk out at a time, so at most that much more is
//     in flight; libvirt's own client still queues what the daemon sends ahead of us);
//   - the caller's end closed (or shut down both ways): what it wrote before is still sent
//     (by the sender), then the stream is finished; an EOF (shutdown for writing only) stops
//     the reading of the socket but the guest's bytes keep coming until the caller closes;
//   - the stream's EOF (the VM stopped, the daemon closed the channel): what came before is
//     written out, then the caller's end sees EOF; a stream error, a failed send or a socket
//     error ends both at once (the stream aborted);
//   - at the end: the registrations removed and the socket closed on the loop thread, the
//     stream finished or aborted and freed on the sender thread; the pump itself is freed by
//     the last of its references (the registrations' free callbacks, the sender thread's),
//     so no callback or thread ever runs on freed memory.
//
// Exclusive access: the channel is opened without VIR_DOMAIN_CHANNEL_FORCE. libvirt gives a
// channel to one stream at a time, across all its clients; a second open while one is held
// fails ("Active channel stream exists"), and is retried like a busy local socket. Forcing
// would let two live warren processes (or a stale and a fresh one) steal the channel from
// each other, each tearing down the other's SSH session, back and forth. A dead holder needs
// no force: libvirtd drops a client's streams when its connection closes (a crashed warren's
// socket closes with it; a lost network ends in the daemon's keepalive), and warren's own
// reconnect follows the close of its previous socket, whose stream this pump aborts at once.
//
// Thread-safe: OpenDomainChannel may be called from any thread.
#pragma once

#include <libvirt/libvirt.h>

#include <cstddef>
#include <string>

#include "lobby/base/status.h"
#include "lobby/base/unique_fd.h"

namespace warren {

// Bytes buffered per direction by one open channel.
inline constexpr size_t kChannelBufferBytes = size_t{256} * 1024;

// Opens `channel` (a <channel type='unix'>'s target name) of the running domain
// `domain_name` on `conn` and returns the caller's end of the socket pair (non-blocking,
// close-on-exec). Closing it ends the channel. NotFound: no such domain; Conflict: the
// domain is not running; Unavailable: the channel could not be opened now (held by another
// stream, the connection failing, no thread for its sender), worth retrying — also what a
// domain without that channel gets (libvirt reports it as an internal error, not told apart
// here).
Result<UniqueFd> OpenDomainChannel(virConnectPtr conn, const std::string& domain_name,
                                   const std::string& channel = "warren.control");

// Channels whose pumps are still running (opened and not yet cleaned up): for leak checks.
int OpenDomainChannelCount();

}  // namespace warren
