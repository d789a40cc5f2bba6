# Several VM hosts under one lobby (issue 18).

# The second libvirt host fixture (tests/integration/second_host.py): a libvirtd in network
# and mount namespaces of the test's own, reached from the root namespace over qemu+ssh and
# qemu+tls; the tiny image uploaded there with vol-upload and booted (TCG), the daemon
# stopped (connections fail) and started again (reconnect, the guest still running), and
# nothing left behind; warren's guest control through the guest's libvirt channel over both
# URIs (libvirt_channel_test's remote mode). About 50 s; never touches the machine's shared
# libvirtd.
add_test(NAME vm_second_host
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_second_host.py)
set_tests_properties(vm_second_host PROPERTIES
  ENVIRONMENT "CHANNEL_TEST=$<TARGET_FILE:libvirt_channel_test>;LANG=C.UTF-8"
  TIMEOUT 600
  RESOURCE_LOCK guests_b
  LABELS "integration;vm;multihost")

# LibvirtHost on that second host, over qemu+ssh and qemu+tls only: the remote image store
# (uploads once, per host), a VM's whole life and nothing left behind
# (libvirt_remote_host_test), then the VmHost contract (vmhost_test's LibvirtRemote case).
add_test(NAME vm_remote_libvirt_host
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_remote_libvirt_host.py)
set_tests_properties(vm_remote_libvirt_host PROPERTIES
  ENVIRONMENT "REMOTE_HOST_TEST=$<TARGET_FILE:libvirt_remote_host_test>;VMHOST_TEST=$<TARGET_FILE:vmhost_test>;LANG=C.UTF-8"
  TIMEOUT 1800
  RESOURCE_LOCK guests_b
  LABELS "integration;vm;multihost")

# One warren over two hosts (the fixture's second libvirtd over qemu+ssh, and this machine's):
# hosts, new --host, a command and a NAME@HOST login in the remote VM over its remote control
# channel, cp on the remote host, the remote daemon stopped (unreachable, unavailable,
# placement elsewhere) and started again (back, answering), rm leaving nothing there.
add_test(NAME vm_multi_host
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_multi_host.py)
set_tests_properties(vm_multi_host PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 900
  RESOURCE_LOCK guests_b
  LABELS "integration;vm;multihost")

# Integrations and web sharing for a VM on the remote host (the fixture's second libvirtd over
# qemu+ssh), everything over its remote control channel: a tiny VM there with `--egress
# integrations` calls an integration (the loopback upstream gets the request with the injected
# header; attach, detach and the unattached refused; 16 MiB streamed; no secret in the guest or
# its files there), its web address answers the owner and not anonymous visitors until `share
# set-public`, and both come back after the remote daemon restarts. About 40 s.
add_test(NAME vm_remote_edge
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_remote_edge.py)
set_tests_properties(vm_remote_edge PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 900
  RESOURCE_LOCK guests_b
  LABELS "integration;vm;multihost")

# Templates per host: the template keeper makes the default shape's on both hosts, `new --host
# second` restores clones of their own there (identity, clock, a restart), and a damaged save
# image there makes `new` boot instead. About 3 minutes.
add_test(NAME vm_remote_templates
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_remote_templates.py)
set_tests_properties(vm_remote_templates PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 900
  RESOURCE_LOCK guests_b
  LABELS "integration;vm;multihost;templates")

# Warm pools per host: each host keeps its own pooled VM restored from its own template, `new
# --host second` takes the second host's, a drained host keeps none, and a clean stop removes
# them all. About 4 minutes.
add_test(NAME vm_remote_pool
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_remote_pool.py)
set_tests_properties(vm_remote_pool PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 900
  RESOURCE_LOCK guests_b
  LABELS "integration;vm;multihost;pool")

# cp --live on the remote host (the fixture's second libvirtd over qemu+ssh): a tiny VM there
# running a web server by hand is copied live on that host (its memory written, rewritten and
# restored there, never crossing to this machine); the server answers in the copy, which has
# its own hostname, host key and MAC; writes do not cross; no memory file is left there; rm
# leaves nothing. About 30 s.
add_test(NAME vm_remote_live_copy
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_remote_live_copy.py)
set_tests_properties(vm_remote_live_copy PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 900
  RESOURCE_LOCK guests_b
  LABELS "integration;vm;multihost")
