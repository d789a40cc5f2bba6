# The web proxy (lobby/web): its pure pieces, and the WebServer end to end on loopback with a
# fake WebGate and a guest server of the test's own (web_peers.py) reached through a GuestPipe
# over a socket — curl, raw sockets, a WebSocket client, TLS with a self-made wildcard cert.
add_executable(web_test unit/web_pieces_test.cc unit/web_server_test.cc unit/web_test_peers.cc)
target_link_libraries(web_test PRIVATE warren_web GTest::gtest_main)
gtest_discover_tests(web_test DISCOVERY_MODE PRE_TEST PROPERTIES LABELS web)
