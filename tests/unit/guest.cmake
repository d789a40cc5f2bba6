# Guest control (vmhost/guest): the runner protocol (pure) and the identity port's PortPipe
# (a socket pair), the runner binary run on this
# machine, the GuestControl scenarios against a local sshd (hermetic, fast) and the same
# scenarios against a real tiny guest under QEMU (one CTest test: it boots the guest once).

add_library(warren_guest_test_targets STATIC unit/guest_test_targets.cc)
target_link_libraries(warren_guest_test_targets
  PUBLIC warren_guest GTest::gtest
  PRIVATE nlohmann_json::nlohmann_json)
target_compile_definitions(warren_guest_test_targets PRIVATE
  WARREN_SOURCE_DIR="${CMAKE_SOURCE_DIR}" WARREN_RUN_BINARY="${WARREN_RUN_BINARY}")
add_dependencies(warren_guest_test_targets warren_run)

add_executable(guest_protocol_test unit/guest_protocol_test.cc unit/port_pipe_test.cc)
target_link_libraries(guest_protocol_test PRIVATE warren_guest GTest::gtest_main)
gtest_discover_tests(guest_protocol_test DISCOVERY_MODE PRE_TEST PROPERTIES LABELS guest)

add_executable(guest_runner_test unit/guest_runner_test.cc)
target_link_libraries(guest_runner_test PRIVATE warren_guest_test_targets GTest::gtest_main)
gtest_discover_tests(guest_runner_test DISCOVERY_MODE PRE_TEST PROPERTIES LABELS guest)

add_executable(guest_local_test unit/guest_control_scenarios.cc unit/guest_local_test.cc)
target_link_libraries(guest_local_test
  PRIVATE warren_guest_test_targets OpenSSL::Crypto GTest::gtest_main)
gtest_discover_tests(guest_local_test DISCOVERY_MODE PRE_TEST PROPERTIES LABELS guest)

# Boots the tiny image (building it first if there is none) and runs every scenario on it.
# In a guest lane (tests/CMakeLists.txt): a TCG guest wants a core.
add_executable(guest_vm_test unit/guest_control_scenarios.cc unit/guest_vm_test.cc)
target_link_libraries(guest_vm_test
  PRIVATE warren_guest_test_targets OpenSSL::Crypto GTest::gtest_main)
add_test(NAME guest_vm COMMAND guest_vm_test)
set_tests_properties(guest_vm PROPERTIES
  RESOURCE_LOCK guests_b TIMEOUT 1200 LABELS "guest;qemu"
  SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\] [0-9]+ test")

# Warm Exec over the open control connection vs a cold handshake per call (not a test: run
# build/tests/guest_exec_bench by hand; it boots its own guest).
add_executable(guest_exec_bench bench/guest_exec.cc)
target_link_libraries(guest_exec_bench PRIVATE warren_guest_test_targets)

# A restored clone's identity (vmhost/guest/identity.h): the request, the report parser and
# ApplyGuestIdentity against a guest played in the test (pure, milliseconds).
add_executable(guest_identity_test unit/guest_identity_test.cc)
target_link_libraries(guest_identity_test PRIVATE warren_vmhost GTest::gtest_main)
gtest_discover_tests(guest_identity_test DISCOVERY_MODE PRE_TEST PROPERTIES LABELS guest)

# How much a busy host stretches the waits that give up on a guest (vmhost/host_load.h).
add_executable(host_load_test unit/host_load_test.cc)
target_link_libraries(host_load_test PRIVATE warren_vmhost GTest::gtest_main)
gtest_discover_tests(host_load_test DISCOVERY_MODE PRE_TEST)

# Memory held for the next VM start on this machine (vmhost/warm_memory.h).
add_executable(warm_memory_test unit/warm_memory_test.cc)
target_link_libraries(warm_memory_test PRIVATE warren_vmhost GTest::gtest_main)
gtest_discover_tests(warm_memory_test DISCOVERY_MODE PRE_TEST)

# `warren-run identity` run as root on this machine inside new mount, UTS and network
# namespaces (unit/guest_runner_sandbox.h: overlays, a real seed disk on a loop device, a
# stand-in for run-setup, temp files over machine-id, the clock calls made no-ops by
# seccomp): nothing on the host changes.
add_executable(guest_identity_runner_test unit/guest_identity_runner_test.cc)
target_link_libraries(guest_identity_runner_test PRIVATE warren_libvirt GTest::gtest_main)
target_compile_definitions(guest_identity_runner_test PRIVATE
  WARREN_RUN_BINARY="${WARREN_RUN_BINARY}")
add_dependencies(guest_identity_runner_test warren_run)
gtest_discover_tests(guest_identity_runner_test DISCOVERY_MODE PRE_TEST PROPERTIES LABELS guest)

# `warren-run apply-seed` (the boot path, and --restored) in the same sandbox, against seed
# disks on loop devices: full, partial, hostile and absent seeds.
add_executable(guest_seed_runner_test unit/guest_seed_runner_test.cc)
target_link_libraries(guest_seed_runner_test PRIVATE warren_libvirt GTest::gtest_main)
target_compile_definitions(guest_seed_runner_test PRIVATE
  WARREN_RUN_BINARY="${WARREN_RUN_BINARY}")
add_dependencies(guest_seed_runner_test warren_run)
gtest_discover_tests(guest_seed_runner_test DISCOVERY_MODE PRE_TEST PROPERTIES LABELS guest)

# The identity of a running tiny guest (with a NIC on slirp) replaced by hand as a restore
# would need it: a second seed written under it, the clock, the MAC. In a guest lane.
add_executable(guest_identity_vm_test unit/guest_identity_vm_test.cc)
target_link_libraries(guest_identity_vm_test PRIVATE warren_guest_test_targets GTest::gtest_main)
target_compile_definitions(guest_identity_vm_test PRIVATE WARREN_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_test(NAME guest_identity_vm COMMAND guest_identity_vm_test)
set_tests_properties(guest_identity_vm PROPERTIES
  RESOURCE_LOCK guests_b TIMEOUT 900 LABELS "guest;qemu"
  SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\] [0-9]+ test")
