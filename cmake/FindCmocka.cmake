# Debian's cmocka 1.1.5 config file sets variables only; wrap them in an
# imported target Cmocka::cmocka.
find_path(CMOCKA_INCLUDE_DIR cmocka.h)
find_library(CMOCKA_LIBRARY NAMES cmocka)

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Cmocka
    REQUIRED_VARS CMOCKA_LIBRARY CMOCKA_INCLUDE_DIR)

if(CMOCKA_FOUND AND NOT TARGET Cmocka::cmocka)
    add_library(Cmocka::cmocka UNKNOWN IMPORTED)
    set_target_properties(Cmocka::cmocka PROPERTIES
        IMPORTED_LOCATION "${CMOCKA_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${CMOCKA_INCLUDE_DIR}")
endif()
mark_as_advanced(CMOCKA_INCLUDE_DIR CMOCKA_LIBRARY)
