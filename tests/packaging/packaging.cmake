# The Debian package and its systemd unit (packaging/debian/README.Debian).
# systemd_unit_verify: `systemd-analyze verify` on the unit (under a second).
add_test(NAME systemd_unit_verify
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/packaging/verify_unit.sh
                 ${CMAKE_SOURCE_DIR}/packaging/debian/warren.service $<TARGET_FILE:warren>)
set_tests_properties(systemd_unit_verify PROPERTIES LABELS packaging TIMEOUT 60
                                                    SKIP_RETURN_CODE 77)
# deb_package: builds the package (dpkg-buildpackage, tests off), lintian, then install,
# upgrade, remove and purge with apt in a mount namespace over copy-on-write overlays of
# /usr, /etc and /var (tests/packaging/deb_test.sh). dpkg-buildpackage packages this build
# tree (WARREN_DEB_PREBUILT) rather than compiling warren again: `packaging/build-deb.sh`
# alone is the from-source build.
add_test(NAME deb_package COMMAND bash ${CMAKE_SOURCE_DIR}/tests/packaging/deb_test.sh)
set_tests_properties(deb_package PROPERTIES LABELS packaging TIMEOUT 1800 SKIP_RETURN_CODE 77
                                            ENVIRONMENT "WARREN_DEB_PREBUILT=${CMAKE_BINARY_DIR}")
