# PCRE2 (8-bit) and utf8proc ship pkg-config files on Debian but no CMake packages. We look them up by
# header and library so that a tree unpacked from the Debian .debs (CMAKE_PREFIX_PATH=<dir>/usr) works too.
find_path(PCRE2_INCLUDE_DIR pcre2.h)
find_library(PCRE2_8_LIBRARY NAMES pcre2-8)
if(NOT PCRE2_INCLUDE_DIR OR NOT PCRE2_8_LIBRARY)
  message(FATAL_ERROR "PCRE2 not found: install libpcre2-dev (scripts/setup.sh does)")
endif()
add_library(PCRE2::8 UNKNOWN IMPORTED)
set_target_properties(PCRE2::8 PROPERTIES IMPORTED_LOCATION ${PCRE2_8_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${PCRE2_INCLUDE_DIR} INTERFACE_COMPILE_DEFINITIONS PCRE2_CODE_UNIT_WIDTH=8)

find_path(UTF8PROC_INCLUDE_DIR utf8proc.h)
find_library(UTF8PROC_LIBRARY NAMES utf8proc)
if(NOT UTF8PROC_INCLUDE_DIR OR NOT UTF8PROC_LIBRARY)
  message(FATAL_ERROR "utf8proc not found: install libutf8proc-dev (scripts/setup.sh does)")
endif()
add_library(utf8proc::utf8proc UNKNOWN IMPORTED)
set_target_properties(utf8proc::utf8proc PROPERTIES IMPORTED_LOCATION ${UTF8PROC_LIBRARY}
  INTERFACE_INCLUDE_DIRECTORIES ${UTF8PROC_INCLUDE_DIR})
