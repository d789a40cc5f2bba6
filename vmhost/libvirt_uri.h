// Whether a libvirt URI names a daemon on another machine, which warren then reaches only
// through libvirt's API (files through the storage API, no std::filesystem, no subprocess on
// that host's paths: libvirt_host.h). Thread-safe: pure.
#pragma once

#include <string_view>

namespace warren {

// libvirt's URIs are DRIVER[+TRANSPORT]://[USER@][HOST][:PORT]/PATH[?PARAMS]. A URI is
// remote when it names a host, or a transport other than "unix" (the local socket): so
// qemu+ssh://root@h2/system, qemu+tls://h3/system and qemu://h3/system are remote, while
// qemu:///system, qemu+unix:///system, qemu:///session and test:///default are local. A
// remote URI that happens to point back at this machine (qemu+ssh://root@localhost/system)
// is still driven as a remote host: warren never assumes it shares a file system with it.
bool IsRemoteLibvirtUri(std::string_view uri);

}  // namespace warren
