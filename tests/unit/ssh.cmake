# Pure parts of the SSH lobby (no sockets): the REPL's line editor, the listener's admission
# rules, a channel's hand-off to its worker (Ctrl-C in the REPL).
add_executable(ssh_unit_test
  unit/line_editor_test.cc unit/ssh_admission_test.cc unit/channel_io_test.cc)
target_link_libraries(ssh_unit_test PRIVATE warren_ssh GTest::gtest_main)
gtest_discover_tests(ssh_unit_test DISCOVERY_MODE PRE_TEST)

# The SSH server end to end in one process (listener, connection threads, workers, the real
# interpreter and LMDB store) driven by OpenSSH's client: seconds; for the sanitizers too.
add_executable(ssh_server_test unit/ssh_server_test.cc)
target_link_libraries(ssh_server_test PRIVATE warren_ssh GTest::gtest_main)
gtest_discover_tests(ssh_server_test DISCOVERY_MODE PRE_TEST)
