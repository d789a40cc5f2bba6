# The HTTP listener, and POST /exec (rendering and admission) over the real interpreter with FakeVmHost and
# FakeGuestControl (exec_handler_test), and REST /v1 likewise (sandbox_handler_test).
add_executable(bridge_test unit/http_server_test.cc unit/exec_handler_test.cc
  unit/sandbox_handler_test.cc)
target_link_libraries(bridge_test PRIVATE
  warren_bridge warren_keys warren_test_fakes warren_test_guest_fake GTest::gtest_main)
gtest_discover_tests(bridge_test DISCOVERY_MODE PRE_TEST)

# The MCP layer (bridge/mcp) without sockets: JSON-RPC, sessions, the transport rules and
# the tools over the real interpreter with FakeVmHost and FakeGuestControl.
add_executable(mcp_test unit/mcp_test.cc)
target_link_libraries(mcp_test PRIVATE
  warren_mcp warren_keys warren_test_fakes warren_test_guest_fake GTest::gtest_main)
gtest_discover_tests(mcp_test DISCOVERY_MODE PRE_TEST)

# The scope matrix (issue 16): every command of the table x every kind of credential x every
# surface (the SSH lobby's exec channel, /exec, MCP exec and exec_read_only, the curated tools,
# the sandbox API over REST and MCP), in process over FakeVmHost and FakeGuestControl.
add_executable(scope_matrix_test unit/scope_matrix_test.cc)
target_link_libraries(scope_matrix_test PRIVATE
  warren_ssh warren_mcp warren_bridge warren_keys warren_test_fakes warren_test_guest_fake
  GTest::gtest_main)
gtest_discover_tests(scope_matrix_test DISCOVERY_MODE PRE_TEST PROPERTIES LABELS unit)
