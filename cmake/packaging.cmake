# `cpack -G DEB` in a build directory: one Debian package, "ckpt", made by the same install rules as
# `cmake --install` — the shared library, the headers, the pkg-config and CMake files, and the ckpt program
# (docs/abi.md says why one package and what its SONAME promises).
set(CPACK_PACKAGE_NAME ckpt)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "ckpt")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "ML training checkpoints as NumPy .npz files: library, headers and ckpt program")
set(CPACK_PACKAGE_DESCRIPTION
    "ckpt saves and restores machine-learning training state as NumPy .npz files,
atomically and durably, behind a stable C ABI. This package holds the shared
library (libckpt.so.${PROJECT_VERSION_MAJOR}), its C headers, pkg-config and CMake package files,
and the ckpt program, which lists, shows, verifies, compares, prints and
converts checkpoints.")
set(CKPT_PACKAGE_CONTACT "ckpt maintainers <maintainers@ckpt.invalid>" CACHE STRING
    "Maintainer field of the Debian package")
set(CPACK_PACKAGE_CONTACT "${CKPT_PACKAGE_CONTACT}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# Debug information stays in the build tree; the package gets stripped binaries (a twentieth of the size).
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # ckpt_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# A shlibs file, so packages built against this one depend on it through dpkg-shlibdeps, and the ldconfig trigger.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# Dependencies as Debian computes them from the ELF files (libc6, libfmt9, libgcc-s1, libstdc++6, zlib1g, with
# versions), when dpkg-shlibdeps (package dpkg-dev) is there; otherwise the same packages without versions.
find_program(CKPT_DPKG_SHLIBDEPS dpkg-shlibdeps)
mark_as_advanced(CKPT_DPKG_SHLIBDEPS)
if(CKPT_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  # The program's libckpt.so.0 is in this very package.
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS "${CMAKE_BINARY_DIR}")
else()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS "libc6, libfmt9, libgcc-s1, libstdc++6, zlib1g")
endif()
# The headers include <stdint.h> and <stddef.h> only; a consumer needs a C compiler, nothing more.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "pkg-config, cmake")

include(CPack)
