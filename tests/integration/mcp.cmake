# MCP over Streamable HTTP against the real `warren serve` on loopback: the transport rules
# with curl, token scope, and the peers (official SDK client, MCP Inspector --strict, the
# conformance suite) from .peers/ (packaging/install-peers.sh; a missing peer fails). The VM
# part runs on real QEMU with the tiny image, in a guest lane (tests/CMakeLists.txt).
function(warren_mcp_test name script timeout)
  add_test(NAME ${name}
           COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/${script})
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
    TIMEOUT ${timeout}
    LABELS "integration;mcp")
endfunction()

warren_mcp_test(mcp_transport test_mcp_transport.py 180)
warren_mcp_test(mcp_peers test_mcp_peers.py 900)
warren_mcp_test(mcp_vm test_mcp_vm.py 1200)
set_tests_properties(mcp_vm PROPERTIES RESOURCE_LOCK guests_a LABELS "integration;mcp;vm")

# The sandbox API (seed 004) on real guests: /mcp/sandbox with the SDK client, REST /v1 with
# curl, one sandbox over every surface (a test size from --sandbox-size fits 2 cores).
warren_mcp_test(sandbox_api test_sandbox_api.py 1800)
set_tests_properties(sandbox_api PROPERTIES RESOURCE_LOCK guests_b LABELS "integration;mcp;vm")
