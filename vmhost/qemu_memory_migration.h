// A paused VM's memory and device state written into a file by its QEMU, through QEMU's own
// monitor (libvirt-qemu's virDomainQemuMonitorCommandWithFiles), for a live copy on this
// machine (libvirt_host_live_copy.cc). libvirt's own ways to it (a save, an external
// snapshot with memory) put its libvirt_iohelper between QEMU and the file, through a 64 KiB
// pipe: 360 ms for a debian guest's 185 MB, against 150 ms for QEMU writing the file itself
// (uncapped), which halves how long the source stays paused. The copy is restored from that
// file behind a header warren writes (save_image.h WriteStreamAsSave).
//
// Behind libvirt's back, within what libvirt tolerates: the domain must be paused first
// (virDomainSuspend) and resumed after (virDomainResume, which QEMU allows after a finished
// or cancelled migration: `cont` takes its disks back); libvirt ignores migration events
// outside a migration job of its own, and marks the domain tainted (custom-monitor). Only on
// this machine: the file descriptor travels over libvirt's local socket.
#pragma once

#include <libvirt/libvirt.h>

#include <chrono>
#include <cstdint>
#include <string_view>

#include "lobby/base/status.h"

namespace warren {

// Migrates paused domain `dom` (VM `id`) into `file_fd` (a regular file opened for writing,
// empty): QMP getfd, migrate-set-parameters (no bandwidth cap), migrate to that fd, then
// query-migrate until it ends. Cancels the migration (migrate_cancel) when it did not finish
// within `timeout`. Returns the file's size once QEMU finished. Unavailable when
// QEMU refused a step or reported the migration failed; Timeout when it did not end in time.
// Thread-safe for distinct domains; one at a time per domain (the fd's name is fixed).
Result<int64_t> MigrateMemoryToFile(virDomainPtr dom, std::string_view id, int file_fd,
                                    std::chrono::milliseconds timeout);

}  // namespace warren
