# The Debian package (cpack -G DEB in the build directory): /usr/bin/h2gate, the
# loopback default config as the conffile /etc/h2gate/h2gate.yaml, the system unit
# and the user unit, the man pages, copyright and changelog. Dependencies come from
# dpkg-shlibdeps, so the package is for the Debian release it is built on; its
# version says which: VERSION~debNNuB (0.1.0~deb12u1 built on Debian 12,
# 0.1.0~deb13u1 on 13; B is H2GATE_DEB_BUILD). "~" sorts before the bare version,
# and deb12 before deb13, so a release upgrade replaces the 12 build with the 13
# one. Checked by tests/deploy/check_package.sh (lintian, systemd-analyze, install
# and run in a pristine container of the release).
set(H2GATE_DEB_DIR ${CMAKE_BINARY_DIR}/debian)
file(MAKE_DIRECTORY ${H2GATE_DEB_DIR})

cmake_host_system_information(RESULT H2GATE_OS_ID QUERY DISTRIB_ID)
cmake_host_system_information(RESULT H2GATE_OS_VERSION_ID QUERY DISTRIB_VERSION_ID)
cmake_host_system_information(RESULT H2GATE_OS_CODENAME QUERY DISTRIB_VERSION_CODENAME)
set(H2GATE_DEB_BUILD 1 CACHE STRING "Build number of the package for this Debian release (the B of ~debNNuB)")
if(H2GATE_OS_ID STREQUAL "debian" AND H2GATE_OS_VERSION_ID MATCHES "^[0-9]+$")
  set(H2GATE_DEB_VERSION "${PROJECT_VERSION}~deb${H2GATE_OS_VERSION_ID}u${H2GATE_DEB_BUILD}")
  set(H2GATE_DEB_DISTRIBUTION ${H2GATE_OS_CODENAME})
else()
  message(WARNING "not a numbered Debian release (/etc/os-release: ID '${H2GATE_OS_ID}', VERSION_ID "
                  "'${H2GATE_OS_VERSION_ID}'): the package's version has no ~debNN suffix")
  set(H2GATE_DEB_VERSION ${PROJECT_VERSION})
  set(H2GATE_DEB_DISTRIBUTION unstable)
endif()
# Units: Debian 12's dpkg keeps them in /lib/systemd (the merged-/usr move was
# not finished); from Debian 13 on they are installed under /usr/lib/systemd.
if(H2GATE_OS_ID STREQUAL "debian" AND H2GATE_OS_VERSION_ID MATCHES "^[0-9]+$"
   AND H2GATE_OS_VERSION_ID LESS 13)
  set(H2GATE_SYSTEM_UNIT_DIR /lib/systemd/system)
else()
  set(H2GATE_SYSTEM_UNIT_DIR /usr/lib/systemd/system)
endif()

# Man pages: Markdown in deploy/man/, turned into roff by pandoc and gzipped,
# at build time (tests/deploy/check_man.py checks them against --help and the
# config loader's keys).
find_program(PANDOC_EXECUTABLE pandoc)
if(PANDOC_EXECUTABLE)
  set(H2GATE_MAN_PAGES)
  foreach(page h2gate.1 h2gate.yaml.5)
    string(REGEX MATCH "[0-9]$" sect ${page})
    add_custom_command(
      OUTPUT ${CMAKE_BINARY_DIR}/man/${page} ${CMAKE_BINARY_DIR}/man/${page}.gz
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_BINARY_DIR}/man
      COMMAND ${PANDOC_EXECUTABLE} --standalone --from markdown --to man
              -M date=${PROJECT_VERSION} -M footer=h2gate\ ${PROJECT_VERSION}
              -o ${CMAKE_BINARY_DIR}/man/${page} ${CMAKE_SOURCE_DIR}/deploy/man/${page}.md
      COMMAND gzip -9nkf ${CMAKE_BINARY_DIR}/man/${page}
      DEPENDS ${CMAKE_SOURCE_DIR}/deploy/man/${page}.md
      COMMENT "pandoc: man page ${page}")
    list(APPEND H2GATE_MAN_PAGES ${CMAKE_BINARY_DIR}/man/${page}.gz)
    install(FILES ${CMAKE_BINARY_DIR}/man/${page}.gz DESTINATION share/man/man${sect})
  endforeach()
  add_custom_target(man_pages ALL DEPENDS ${H2GATE_MAN_PAGES})
else()
  message(WARNING "pandoc not found (deploy/install-deps.sh installs it): no man pages, "
                  "and the Debian package will lack them")
endif()

install(FILES ${CMAKE_SOURCE_DIR}/config/examples/default.yaml
        DESTINATION /etc/h2gate RENAME h2gate.yaml
        PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
install(FILES ${CMAKE_SOURCE_DIR}/deploy/debian/h2gate.service DESTINATION ${H2GATE_SYSTEM_UNIT_DIR})
install(FILES ${CMAKE_SOURCE_DIR}/deploy/debian/h2gate-user.service
        DESTINATION lib/systemd/user RENAME h2gate.service)
install(FILES ${CMAKE_SOURCE_DIR}/deploy/debian/copyright DESTINATION share/doc/h2gate)
# The README's "Behind a corporate proxy" and h2gate.yaml(5) point at these.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/config/examples/ DESTINATION share/doc/h2gate/examples
        FILES_MATCHING PATTERN "*.yaml")

# Debian wants a changelog in every binary package, compressed with gzip -9n; a
# version without a Debian revision is a native package: changelog.gz.
file(WRITE ${H2GATE_DEB_DIR}/changelog
     "h2gate (${H2GATE_DEB_VERSION}) ${H2GATE_DEB_DISTRIBUTION}; urgency=medium\n\n"
     "  * Built from the h2gate source tree with CPack (cmake/packaging.cmake).\n\n"
     " -- h2gate maintainers <h2gate@example.org>  Wed, 25 Nov 2026 00:00:00 +0000\n")
execute_process(COMMAND gzip -9nf ${H2GATE_DEB_DIR}/changelog RESULT_VARIABLE gz_rc)
if(NOT gz_rc EQUAL 0)
  message(FATAL_ERROR "gzip of the Debian changelog failed")
endif()
install(FILES ${H2GATE_DEB_DIR}/changelog.gz DESTINATION share/doc/h2gate)

file(WRITE ${H2GATE_DEB_DIR}/conffiles "/etc/h2gate/h2gate.yaml\n")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME h2gate)
set(CPACK_PACKAGE_VERSION ${H2GATE_DEB_VERSION})
set(CPACK_PACKAGE_CONTACT "h2gate maintainers <h2gate@example.org>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "local forward proxy that carries traffic to upstream proxies over HTTP/2")
# The synopsis is CPACK_PACKAGE_DESCRIPTION_SUMMARY; these lines follow it.
set(CPACK_PACKAGE_DESCRIPTION
    "Applications use h2gate (127.0.0.1:3128) as their HTTP and HTTPS proxy. It
carries their requests and CONNECT tunnels to upstream HTTPS forward proxies
over TLS, negotiating HTTP/2 so that every tunnel is one stream of a shared
connection (HTTP/1.1 when the proxy has no HTTP/2), or connects directly.
It has routing and access rules, Prometheus metrics, an admin endpoint,
configuration reload and a self-test of the proxy path (h2gate check).")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# NTLM to upstream proxies goes through GSSAPI with this mechanism (loaded at run
# time, so dpkg-shlibdeps cannot see it).
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS gss-ntlmssp)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${H2GATE_DEB_DIR}/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
    OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
# Only the h2gate binary and the files above: not the test helpers.
set(CPACK_INSTALL_CMAKE_PROJECTS "${CMAKE_BINARY_DIR};h2gate;Unspecified;/")
include(CPack)
