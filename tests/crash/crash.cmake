# Crash points (issue 16): warren SIGKILLed at seeded points of its changes, restarted, and
# checked. crash_world runs the real interpreter, store and start-up over the fake host
# persisted in a data dir (tests/fakes); crash_points.py drives it at 100 points. The real
# libvirt sample is tests/integration/test_crash_points.py (vm_crash_points).
add_executable(crash_world crash/crash_world.cc)
target_link_libraries(crash_world PRIVATE
  warren_commands warren_keys warren_test_fakes warren_test_guest_fake PkgConfig::LMDB)
# fdatasync is defined here for liblmdb to call: keep it in the dynamic symbol table.
target_link_options(crash_world PRIVATE -Wl,--export-dynamic-symbol=fdatasync)

add_test(NAME crash_points
         COMMAND ${WARREN_PYTHON} ${CMAKE_SOURCE_DIR}/tests/crash/crash_points.py
                 --world $<TARGET_FILE:crash_world>)
set_tests_properties(crash_points PROPERTIES TIMEOUT 600 LABELS "crash")
