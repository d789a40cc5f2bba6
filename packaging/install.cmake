# What `cmake --install` puts where (the Debian package, packaging/debian/, is built from it):
#   bin/warren                           the server
#   lib/warren/warren-run                the guest runner warren uploads into each VM
#                                        (found next to warren, else here: runner_install.cc)
#   lib/warren/guest/warren-run          the guest runner baked into images (`image-HASH`)
#   lib/warren/guest/warren-launcher     the images' control-port launcher
#   share/warren/images/                 the image build scripts (packaging/images), which use
#                                        lib/warren/guest/ instead of compiling (lib.sh)
# The guest binaries are static C, built with the system gcc like the host's runner
# (vmhost/guest/CMakeLists.txt), whatever the C++ build's flags.
install(TARGETS warren RUNTIME DESTINATION bin)
install(PROGRAMS ${WARREN_RUN_BINARY} DESTINATION lib/warren)

# The image runner's version is the one packaging/images/lib.sh's build_runner gives it:
# "image-" and the first 12 hex digits of the SHA-256 of its .c files then its .h files, in
# name order, concatenated.
set(_runner_dir ${CMAKE_SOURCE_DIR}/vmhost/guest/runner)
file(GLOB _runner_c ${_runner_dir}/*.c)
file(GLOB _runner_h ${_runner_dir}/*.h)
list(SORT _runner_c)
list(SORT _runner_h)
set(_runner_text "")
foreach(f ${_runner_c} ${_runner_h})
  file(READ ${f} _t)
  string(APPEND _runner_text "${_t}")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${f})
endforeach()
string(SHA256 _image_runner_hash "${_runner_text}")
string(SUBSTRING ${_image_runner_hash} 0 12 _image_runner_hash)
set(WARREN_IMAGE_RUN_VERSION "image-${_image_runner_hash}")

set(_guest_out ${CMAKE_BINARY_DIR}/guest)
set(_launcher_src ${CMAKE_SOURCE_DIR}/packaging/images/launcher/warren-launcher.c)
add_custom_command(
  OUTPUT ${_guest_out}/warren-run ${_guest_out}/warren-launcher
  COMMAND ${CMAKE_COMMAND} -E make_directory ${_guest_out}
  COMMAND ${WARREN_GCC} -static -O2 -s -Wall -Wextra -Werror -std=gnu11
          "-DWARREN_RUN_VERSION=\"${WARREN_IMAGE_RUN_VERSION}\""
          -o ${_guest_out}/warren-run ${_runner_c}
  COMMAND ${WARREN_GCC} -static -O2 -s -Wall -Wextra -Werror -o ${_guest_out}/warren-launcher
          ${_launcher_src}
  DEPENDS ${_runner_c} ${_runner_h} ${_launcher_src}
  COMMENT "Building the images' guest runner and launcher (static)"
  VERBATIM)
add_custom_target(warren_guest_binaries ALL
                  DEPENDS ${_guest_out}/warren-run ${_guest_out}/warren-launcher)
install(PROGRAMS ${_guest_out}/warren-run ${_guest_out}/warren-launcher
        DESTINATION lib/warren/guest)

install(DIRECTORY ${CMAKE_SOURCE_DIR}/packaging/images/ DESTINATION share/warren/images
        USE_SOURCE_PERMISSIONS
        PATTERN "launcher" EXCLUDE)
