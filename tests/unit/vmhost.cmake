# The fake VmHost lives here, in tests, never in the product.
add_library(warren_test_fakes STATIC fakes/fake_vm_host.cc fakes/fake_vm_host_state.cc)
target_link_libraries(warren_test_fakes PUBLIC warren_vmhost PRIVATE nlohmann_json::nlohmann_json)

# No fake: finds (or starts) the real libvirtd, the tiny image and a data dir for the
# real-QEMU tests.
add_library(warren_test_real_libvirt_env STATIC unit/real_libvirt_env.cc)
target_link_libraries(warren_test_real_libvirt_env PUBLIC warren_libvirt GTest::gtest)

# The XML warren writes for libvirt and the XML it reads back, on stored files
# (tests/golden/): pure, fast, no daemon.
add_executable(vmhost_xml_test
  unit/domain_xml_test.cc
  unit/libvirt_xml_test.cc)
target_compile_definitions(vmhost_xml_test PRIVATE WARREN_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
target_link_libraries(vmhost_xml_test PRIVATE warren_libvirt GTest::gtest_main)
gtest_discover_tests(vmhost_xml_test DISCOVERY_MODE PRE_TEST)

# libvirt's save image header (save_image.h): synthetic images through pipes and files, and
# the header of a real save (tests/golden/libvirt/save_header_tiny.bin). No daemon.
add_executable(save_image_test unit/save_image_test.cc unit/qcow2_header_test.cc
                               unit/migration_stream_test.cc)
target_compile_definitions(save_image_test PRIVATE WARREN_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
target_link_libraries(save_image_test PRIVATE warren_libvirt GTest::gtest_main)
gtest_discover_tests(save_image_test DISCOVERY_MODE PRE_TEST)

# The host isolation rules: the ruleset text (a golden), parsing, and nft's errors through
# a stand-in program (no rule touches the host).
add_executable(egress_firewall_test unit/egress_firewall_test.cc)
target_compile_definitions(egress_firewall_test PRIVATE WARREN_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
target_link_libraries(egress_firewall_test PRIVATE warren_libvirt GTest::gtest_main)
gtest_discover_tests(egress_firewall_test DISCOVERY_MODE PRE_TEST)

# Unit tests always run; the real-QEMU cases inside skip (saying why; under CI they fail)
# unless a tiny image is found (WARREN_TEST_IMAGES, default /var/lib/warren-test/images) and
# libvirtd answers or can be started. In guest lane a (tests/CMakeLists.txt): real guests.
add_executable(vmhost_test
  unit/vm_host_contract_test.cc
  unit/vm_state_events_test.cc
  unit/image_layout_test.cc
  unit/libvirt_host_test.cc)
target_compile_definitions(vmhost_test PRIVATE WARREN_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
target_link_libraries(vmhost_test
  PRIVATE warren_test_fakes warren_test_real_libvirt_env GTest::gtest_main)
gtest_discover_tests(vmhost_test DISCOVERY_MODE PRE_TEST PROPERTIES RESOURCE_LOCK guests_a)

# LibvirtHost on a remote libvirt host (issue 18): run by tests/integration/
# test_remote_libvirt_host.py (CTest vm_remote_libvirt_host), which starts the second host
# and passes its URI; on its own every test but the URI parsing skips.
add_executable(libvirt_remote_host_test unit/libvirt_remote_host_test.cc)
target_link_libraries(libvirt_remote_host_test
  PRIVATE warren_test_real_libvirt_env GTest::gtest_main)

# A host's reconnect logic (vmhost/reconnector.h: backoff, the daemon restarted only when
# warren started it, others refused while it restores): steps are switches here, no daemon.
add_executable(reconnector_test unit/reconnector_test.cc)
target_link_libraries(reconnector_test PRIVATE warren_libvirt GTest::gtest_main)
gtest_discover_tests(reconnector_test DISCOVERY_MODE PRE_TEST)

# A VM's control port through libvirt (vmhost/libvirt_channel.h): a tiny VM booted on the
# local libvirt, its channel opened with virDomainOpenChannel on a qemu:///system connection,
# guest control over it (exec, 4 MiB each way, reconnect, no stealing, no leaks), and a guest
# that stops reading its port stalling neither the event loop nor a second tiny VM's channel
# on another connection. One CTest test: it boots the two VMs once.
# tests/integration/test_second_host.py runs the same binary against a VM on the second host
# over qemu+ssh and qemu+tls (WARREN_CHANNEL_URI ...).
add_executable(libvirt_channel_test unit/libvirt_channel_test.cc)
target_link_libraries(libvirt_channel_test
  PRIVATE warren_guest warren_test_real_libvirt_env OpenSSL::Crypto GTest::gtest_main)
target_compile_definitions(libvirt_channel_test PRIVATE WARREN_RUN_BINARY="${WARREN_RUN_BINARY}")
add_dependencies(libvirt_channel_test warren_run)
add_test(NAME libvirt_channel COMMAND libvirt_channel_test)
set_tests_properties(libvirt_channel PROPERTIES
  RESOURCE_LOCK guests_a TIMEOUT 900 LABELS "guest;qemu;vm"
  SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\] [0-9]+ test")
