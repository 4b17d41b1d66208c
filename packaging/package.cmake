# SPDX-License-Identifier: GPL-2.0-only OR Linux-OpenIB
# Installation layout and the Debian package (CPack DEB). Included from the root
# CMakeLists.txt; `cpack -G DEB` (scripts/package) builds smha_<version>_<arch>.deb.
#
# Layout (Debian 12): binaries under the install prefix (/usr in the package),
# the units in /lib/systemd/system, the configuration in /etc/smha (conffile).
# The defaults below are that layout; the RPM (packaging/rpm/smha.spec) sets
# SMHA_UNIT_DIR to EL's %{_unitdir} and SMHA_DEBIAN_DOCS=OFF (rpm installs the
# licence and docs itself).
set(SMHA_UNIT_DIR /lib/systemd/system CACHE PATH "Absolute directory of the systemd units")
option(SMHA_DEBIAN_DOCS "Install changelog.Debian.gz and copyright under share/doc/smha" ON)

set(SMHA_PKG_DIR ${CMAKE_CURRENT_LIST_DIR})
set(SMHA_PKG_BUILD ${CMAKE_BINARY_DIR}/packaging)

# Programs.
if(TARGET smhad)
  install(TARGETS smhad RUNTIME DESTINATION sbin)
endif()
install(TARGETS smctl RUNTIME DESTINATION bin)
# smctl sminfo's helper (libibumad), where smctl looks for it (daemon/CMakeLists.txt).
install(TARGETS smctl-sminfo RUNTIME DESTINATION ${SMHA_LIBEXEC_DIR})

# systemd units and configuration. smhad@.service (one smhad per fabric, NAME
# reading /etc/smha/NAME.yaml) is made from smhad.service, so the two never
# differ in anything but what names the instance.
set(SMHA_UNIT ${PROJECT_SOURCE_DIR}/systemd/smhad.service)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${SMHA_UNIT})
file(READ ${SMHA_UNIT} smha_unit_text)
foreach(pair
    "Description=smha: InfiniBand subnet manager high availability (smhad)|Description=smha: InfiniBand subnet manager high availability (smhad, fabric %i)"
    "ExecStart=/usr/sbin/smhad -c /etc/smha/smha.yaml|ExecStart=/usr/sbin/smhad -c /etc/smha/%i.yaml --fabric %i\nSyslogIdentifier=smhad@%i")
  string(REPLACE "|" ";" pair "${pair}")
  list(GET pair 0 from)
  list(GET pair 1 to)
  string(REPLACE "\\n" "\n" to "${to}")
  string(FIND "${smha_unit_text}" "${from}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "systemd/smhad.service: no line '${from}' to make smhad@.service from")
  endif()
  string(REPLACE "${from}" "${to}" smha_unit_text "${smha_unit_text}")
endforeach()
file(WRITE ${SMHA_PKG_BUILD}/smhad@.service "${smha_unit_text}")
install(FILES ${SMHA_UNIT} ${SMHA_PKG_BUILD}/smhad@.service DESTINATION ${SMHA_UNIT_DIR})
# /etc/smha on Debian and EL alike: the units' ExecStart= and smhad's default name it.
install(FILES ${PROJECT_SOURCE_DIR}/config/smha.yaml DESTINATION /etc/smha)

# Man pages (roff in doc/man), compressed as Debian policy wants.
set(SMHA_MANPAGES smhad.8 smctl.8 smha.yaml.5)
set(SMHA_MANPAGES_GZ)
foreach(page ${SMHA_MANPAGES})
  set(src ${PROJECT_SOURCE_DIR}/doc/man/${page})
  set(gz ${SMHA_PKG_BUILD}/man/${page}.gz)
  add_custom_command(OUTPUT ${gz}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${SMHA_PKG_BUILD}/man
    COMMAND gzip -9n -c ${src} > ${gz}
    DEPENDS ${src} VERBATIM)
  list(APPEND SMHA_MANPAGES_GZ ${gz})
  string(REGEX REPLACE ".*\\.([0-9])$" "\\1" section ${page})
  install(FILES ${gz} DESTINATION share/man/man${section})
endforeach()

# Debian changelog (compressed) and copyright.
set(SMHA_CHANGELOG_GZ ${SMHA_PKG_BUILD}/changelog.Debian.gz)
add_custom_command(OUTPUT ${SMHA_CHANGELOG_GZ}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${SMHA_PKG_BUILD}
  COMMAND gzip -9n -c ${SMHA_PKG_DIR}/debian/changelog > ${SMHA_CHANGELOG_GZ}
  DEPENDS ${SMHA_PKG_DIR}/debian/changelog VERBATIM)
add_custom_target(smha_package_files ALL DEPENDS ${SMHA_MANPAGES_GZ} ${SMHA_CHANGELOG_GZ})
if(SMHA_DEBIAN_DOCS)
  install(FILES ${SMHA_CHANGELOG_GZ} ${SMHA_PKG_DIR}/debian/copyright DESTINATION share/doc/smha)
endif()

# Prometheus alerting rules (doc/drift.md).
install(FILES ${SMHA_PKG_DIR}/prometheus/smha-alerts.yml DESTINATION share/smha/prometheus)
# Grafana dashboard (doc/health.md, "Shown").
install(FILES ${SMHA_PKG_DIR}/grafana/smha-dashboard.json DESTINATION share/smha/grafana)

# The peer channel's certificates (doc/continuity.md): a CA and one per head, with openssl.
install(PROGRAMS ${PROJECT_SOURCE_DIR}/scripts/make-peer-certs DESTINATION share/smha)

# Pacemaker (doc/pacemaker.md): the OCF resource agent ocf:smha:smhad at the
# standard OCF path, and the notify hooks that publish mastership and ask for fencing.
install(PROGRAMS ${SMHA_PKG_DIR}/ocf/smhad DESTINATION /usr/lib/ocf/resource.d/smha)
install(PROGRAMS ${SMHA_PKG_DIR}/hooks/pacemaker-attribute ${SMHA_PKG_DIR}/hooks/pacemaker-fence
        DESTINATION share/smha/hooks)

# Bash completion.
install(FILES ${SMHA_PKG_DIR}/smctl.bash-completion
        DESTINATION share/bash-completion/completions RENAME smctl)

# --- CPack: one binary package, "smha" ------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME smha)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_PACKAGE_CONTACT "smha maintainers <maintainers@smha.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "InfiniBand subnet manager high availability (smhad, smctl)")
# The synopsis is CPACK_PACKAGE_DESCRIPTION_SUMMARY; CPack indents these lines
# and turns the empty line into " .".
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
"smhad runs beside OpenSM on each head node of an InfiniBand fabric. It
renders opensm.conf, supervises OpenSM, polls SMInfo of every subnet manager
through libibumad and steers Master/Standby so that exactly one subnet
manager is MASTER and a dead master is replaced in about a second instead
of OpenSM's default of about a minute.

smctl is the command-line tool: status, handover drills, SMInfo queries and
configuration rendering.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/smha/smha")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# opensm: smhad starts it; libibumad3: named even though shlibdeps finds it, as
# the contract; adduser: postinst's addgroup.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "opensm, libibumad3, adduser")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "infiniband-diags")
# The OCF agent runs under Pacemaker with resource-agents' shell functions and python3.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "pacemaker, resource-agents")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${SMHA_PKG_DIR}/debian/conffiles
  ${SMHA_PKG_DIR}/debian/preinst
  ${SMHA_PKG_DIR}/debian/postinst
  ${SMHA_PKG_DIR}/debian/prerm
  ${SMHA_PKG_DIR}/debian/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
