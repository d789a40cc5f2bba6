// The backing file named in a qcow2 file's header, rewritten in place: how a disk layer copied
// to another host (libvirt_host_migrate.cc) is made to stand on that host's layer or image
// below, whose path differs, without qemu-img there (the copy streams through libvirt's
// storage API). Pure; thread-safe.
#pragma once

#include <string>

#include "lobby/base/status.h"

namespace warren {

// `head` is the start of a qcow2 file, at least its whole first cluster (or the whole file
// when smaller): its header's backing file name becomes `backing`, in the same place (qemu-img
// writes the name in the header cluster, after the header extensions), the old name's bytes
// zeroed. The backing format extension is left as it is. InvalidArgument when `head` is no
// qcow2 header, names no backing file, or the new name does not fit in the header cluster.
Status RewriteQcow2Backing(std::string& head, const std::string& backing);

// The cluster size a qcow2 header declares; 0 when `head` is too short or no qcow2 header.
uint64_t Qcow2ClusterSize(const std::string& head);

}  // namespace warren
