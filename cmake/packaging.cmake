# SPDX-License-Identifier: Apache-2.0
# What the Debian packages need from the build (docs/abi.md, "The Debian packages"): the ckpt program's manual page,
# written from its --help by help2man at build time and installed with it, and the `deb` target, which runs
# packaging/build-debs on this build directory: libckpt0, libckpt-dev, libckpt-mpi0, libckpt-mpi-dev,
# libckpt-s3-0, libckpt-s3-dev, ckpt-tools and python3-ckpt, in <build>/deb. The packages need a build configured
# with -DCMAKE_INSTALL_PREFIX=/usr (libraries in /usr/lib/<multiarch triplet>) and no sanitizer.

# The manual page, when help2man is there (scripts/deps test installs it). Not in sanitizer builds, which are never
# packaged: the instrumented program would run at build time.
find_program(CKPT_HELP2MAN help2man)
mark_as_advanced(CKPT_HELP2MAN)
if(TARGET ckpt_cli AND CKPT_HELP2MAN AND NOT CKPT_SANITIZE)
  set(CKPT_MAN_PAGE ${CMAKE_BINARY_DIR}/man/ckpt.1)
  # Each command's own help (arguments and options) goes in as the page's COMMANDS section.
  add_custom_command(OUTPUT ${CKPT_MAN_PAGE}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cmake/man-commands.sh $<TARGET_FILE:ckpt_cli>
            ${CMAKE_BINARY_DIR}/man/commands.h2m
    COMMAND ${CKPT_HELP2MAN} --no-info --no-discard-stderr --version-string=${PROJECT_VERSION}
            "--name=inspect, verify, compare, convert and clean up ML checkpoints (.npz and safetensors files)"
            --include=${CMAKE_BINARY_DIR}/man/commands.h2m --output=${CKPT_MAN_PAGE} $<TARGET_FILE:ckpt_cli>
    DEPENDS ckpt_cli ${CMAKE_CURRENT_SOURCE_DIR}/cmake/man-commands.sh
    COMMENT "help2man: the manual page ckpt.1 from ckpt --help"
    VERBATIM)
  add_custom_target(ckpt_man ALL DEPENDS ${CKPT_MAN_PAGE})
  install(FILES ${CKPT_MAN_PAGE} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
elseif(TARGET ckpt_cli AND NOT CKPT_SANITIZE)
  message(STATUS "ckpt: no help2man (scripts/deps test installs it): the ckpt program's manual page is not built")
endif()

# Read-only relocations and every symbol bound at load time, as Debian's hardening asks of what it ships. (Fortified
# libc calls come with CPPFLAGS=-D_FORTIFY_SOURCE=2, e.g. from dpkg-buildflags: docs/abi.md.)
foreach(t ckpt ckpt_mpi ckpt_s3 ckpt_cli ckpt_speedups)
  if(TARGET ${t})
    target_link_options(${t} PRIVATE "LINKER:-z,relro" "LINKER:-z,now")
  endif()
endforeach()
# libckpt_s3 and libckpt_mpi export their C functions only, as libckpt does (cmake/ckpt.map).
foreach(t ckpt_mpi ckpt_s3)
  if(TARGET ${t})
    target_link_options(${t} PRIVATE "LINKER:--version-script=${PROJECT_SOURCE_DIR}/cmake/ckpt-plugin.map")
    set_property(TARGET ${t} APPEND PROPERTY LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/ckpt-plugin.map)
  endif()
endforeach()

add_custom_target(deb
  COMMAND bash ${PROJECT_SOURCE_DIR}/packaging/build-debs ${CMAKE_BINARY_DIR} ${CMAKE_BINARY_DIR}/deb
  COMMENT "Debian packages in ${CMAKE_BINARY_DIR}/deb"
  USES_TERMINAL
  VERBATIM)
