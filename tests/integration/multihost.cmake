# Several VM hosts under one lobby (issue 18).

# The second libvirt host fixture (tests/integration/second_host.py): a libvirtd in network
# and mount namespaces of the test's own, reached from the root namespace over qemu+ssh and
# qemu+tls; the tiny image uploaded there with vol-upload and booted (TCG), the daemon
# stopped (connections fail) and started again (reconnect, the guest still running), and
# nothing left behind. About 40 s; never touches the machine's shared libvirtd.
add_test(NAME vm_second_host
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_second_host.py)
set_tests_properties(vm_second_host PROPERTIES
  ENVIRONMENT "LANG=C.UTF-8"
  TIMEOUT 600
  RESOURCE_LOCK guests_b
  LABELS "integration;vm;multihost")
