# OAuth sign-in for MCP clients against the real `warren serve` (lobby only): the flow and
# every refusal over http.client + OpenSSH; the official MCP SDK's OAuth client headless
# (Node 22 from .peers/, packaging/install-peers.sh); the sign-in page in headless Chromium.
foreach(t oauth:test_oauth.py oauth_sdk:test_oauth_sdk.py oauth_page:test_oauth_page.py)
  string(REPLACE ":" ";" parts ${t})
  list(GET parts 0 name)
  list(GET parts 1 script)
  add_test(NAME ${name}
           COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/integration/${script})
  set_tests_properties(${name} PROPERTIES
    ENVIRONMENT "WARREN_BIN=$<TARGET_FILE:warren>;LANG=C.UTF-8"
    TIMEOUT 180
    LABELS "integration;oauth")
endforeach()
