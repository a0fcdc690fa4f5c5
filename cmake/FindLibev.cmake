# Find libev by path: Debian's libev-dev ships neither a pkg-config file nor
# a CMake package.  Defines Libev::libev and LIBEV_FOUND.
find_path(LIBEV_INCLUDE_DIR ev.h PATH_SUFFIXES libev)
find_library(LIBEV_LIBRARY NAMES ev)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Libev
    REQUIRED_VARS LIBEV_LIBRARY LIBEV_INCLUDE_DIR)

if(LIBEV_FOUND AND NOT TARGET Libev::libev)
    add_library(Libev::libev UNKNOWN IMPORTED)
    set_target_properties(Libev::libev PROPERTIES
        IMPORTED_LOCATION "${LIBEV_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${LIBEV_INCLUDE_DIR}")
endif()
mark_as_advanced(LIBEV_INCLUDE_DIR LIBEV_LIBRARY)
