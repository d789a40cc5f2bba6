# Loopback integration tests of the HTTP bridge: POST /exec with API tokens, HTTPS and
# /metrics against the real `warren serve` (curl, http.client), and the /exec statuses that
# need VMs (in a guest lane: tests/CMakeLists.txt). Each cleans up its processes and files.
add_test(NAME http_exec
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_http_exec.py)
set_tests_properties(http_exec PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 180
  LABELS "integration;http")

# The listener under abuse: slowloris, per-source caps, the descriptor limit (CPU time from
# /proc), the open-files limit raised at start.
add_test(NAME http_limits
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_http_limits.py)
set_tests_properties(http_limits PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 120
  LABELS "integration;http")

add_test(NAME http_exec_vm
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_http_exec_vm.py)
set_tests_properties(http_exec_vm PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 900
  RESOURCE_LOCK guests_a
  LABELS "integration;vm;http")

# The web listener as serve sets it up: HTTPS with --tls-cert/--tls-key (a wildcard
# certificate; __Host- Secure cookies), --web off (no link printed), hosts outside the domain.
add_test(NAME web_listener
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/test_web_listener.py)
set_tests_properties(web_listener PROPERTIES
  ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
  TIMEOUT 120
  LABELS "integration;http;web")
