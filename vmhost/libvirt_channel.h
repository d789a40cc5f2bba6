// A VM's virtio-serial channel reached through libvirt (virDomainOpenChannel) instead of its
// unix socket: how warren reaches the control port of a VM on a remote host (qemu+ssh://,
// qemu+tls://), where that socket is on the other machine (docs/multi_host_transport.md).
//
// The channel is a non-blocking libvirt stream on the host's connection, driven as
// `virsh console` drives one: callbacks on libvirt's event loop thread (libvirt_events.h)
// move bytes between the stream and one end of a socket pair; the caller gets the other end,
// a plain socket it can hand to libssh (SSH_OPTIONS_FD) as it would the local socket.
//
// The pump, all on the event loop thread:
//   - two bounded buffers (kChannelBufferBytes each way); a side is not read while the
//     buffer it fills is full, so a slow reader holds back the writer (no unbounded queue
//     of ours; libvirt's own client still queues what the daemon sends ahead of us);
//   - the caller's end closed (or shut down both ways): what it wrote before is still sent,
//     then the stream is finished; an EOF (shutdown for writing only) stops the reading of
//     the socket but the guest's bytes keep coming until the caller closes;
//   - the stream's EOF (the VM stopped, the daemon closed the channel): what came before is
//     written out, then the caller's end sees EOF; a stream error or a socket error ends
//     both at once (the stream aborted);
//   - at the end: both registrations removed, the stream finished or aborted and freed, the
//     socket closed; the pump itself is freed by the last of the registrations' free
//     callbacks, so no callback ever runs on freed memory.
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
// A known cost of running on the event loop: libvirt sends stream data synchronously (the
// remote driver's virStreamSend returns once the packet is written to the connection), so
// when the daemon stops reading (the guest does not drain its port: paused, hung, hostile)
// and the connection's buffers are full, a send blocks libvirt's event loop thread — every
// connection's events and keepalive in the process — until the daemon reads again or drops
// the connection. Sends are a chunk at a time, so it takes that much backlog first.
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
// stream, the connection failing), worth retrying — also what a domain without that channel
// gets (libvirt reports it as an internal error, not told apart here).
Result<UniqueFd> OpenDomainChannel(virConnectPtr conn, const std::string& domain_name,
                                   const std::string& channel = "warren.control");

// Channels whose pumps are still running (opened and not yet cleaned up): for leak checks.
int OpenDomainChannelCount();

}  // namespace warren
