# BPF objects and their libbpf skeletons: compiled with clang for the bpf
# target against a vmlinux.h generated from the running kernel's BTF, the
# skeletons generated with bpftool. Used by bpf/ (the agent's program) and
# bench/ (the benchmarks' probes):
#
#   include("${PROJECT_SOURCE_DIR}/cmake/bpf.cmake")
#   traceprof_bpf_object(NAME [SKEL_TARGET target] [INCLUDES file...])
#
# compiles NAME.bpf.c of the calling folder (which includes "vmlinux.h"
# and "NAME.h", its header shared with user space) into NAME.bpf.o and
# generates include/NAME.skel.h in the folder's build directory; the
# custom target NAME_bpf_gen makes both. SKEL_TARGET also defines an
# INTERFACE library to link for the skeleton: its directory and the
# source root on the include path, libbpf and libelf. INCLUDES: files of
# the folder that NAME.bpf.c includes (rebuilt when they change). vmlinux.h is made
# once, in bpf/'s build directory (target traceprof_vmlinux_h).
find_program(BPFTOOL bpftool HINTS /usr/sbin /usr/local/sbin REQUIRED)
find_program(BPF_CLANG NAMES clang clang-14 REQUIRED)
set(TRACEPROF_VMLINUX_BTF "/sys/kernel/btf/vmlinux" CACHE FILEPATH
    "kernel BTF that vmlinux.h is generated from")

if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(TRACEPROF_BPF_ARCH x86)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(TRACEPROF_BPF_ARCH arm64)
else()
  message(FATAL_ERROR "bpf: no BPF target arch for ${CMAKE_SYSTEM_PROCESSOR}")
endif()

set(TRACEPROF_VMLINUX_DIR "${PROJECT_BINARY_DIR}/bpf/include")
if(NOT TARGET traceprof_vmlinux_h)
  add_custom_command(
    OUTPUT "${TRACEPROF_VMLINUX_DIR}/vmlinux.h"
    COMMAND ${CMAKE_COMMAND} -E make_directory "${TRACEPROF_VMLINUX_DIR}"
    COMMAND "${BPFTOOL}" btf dump file "${TRACEPROF_VMLINUX_BTF}" format c > "${TRACEPROF_VMLINUX_DIR}/vmlinux.h"
    COMMENT "Generating vmlinux.h from ${TRACEPROF_VMLINUX_BTF}"
    VERBATIM)
  add_custom_target(traceprof_vmlinux_h DEPENDS "${TRACEPROF_VMLINUX_DIR}/vmlinux.h")
endif()

function(traceprof_bpf_object name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "SKEL_TARGET" "INCLUDES")
  set(extra "")
  foreach(inc IN LISTS arg_INCLUDES)
    list(APPEND extra "${CMAKE_CURRENT_SOURCE_DIR}/${inc}")
  endforeach()
  set(src "${CMAKE_CURRENT_SOURCE_DIR}/${name}.bpf.c")
  set(obj "${CMAKE_CURRENT_BINARY_DIR}/${name}.bpf.o")
  set(skel_dir "${CMAKE_CURRENT_BINARY_DIR}/include")
  set(skel "${skel_dir}/${name}.skel.h")
  add_custom_command(
    OUTPUT "${obj}"
    COMMAND "${BPF_CLANG}" -g -O2 -target bpf -D__TARGET_ARCH_${TRACEPROF_BPF_ARCH}
            -Wall -Werror -I "${TRACEPROF_VMLINUX_DIR}" -I "${CMAKE_CURRENT_SOURCE_DIR}"
            -c "${src}" -o "${obj}"
    DEPENDS "${src}" "${CMAKE_CURRENT_SOURCE_DIR}/${name}.h" ${extra}
            "${TRACEPROF_VMLINUX_DIR}/vmlinux.h"
    COMMENT "Compiling BPF object ${name}.bpf.o"
    VERBATIM)
  add_custom_command(
    OUTPUT "${skel}"
    COMMAND ${CMAKE_COMMAND} -E make_directory "${skel_dir}"
    COMMAND "${BPFTOOL}" gen skeleton "${obj}" name ${name}_bpf > "${skel}"
    DEPENDS "${obj}"
    COMMENT "Generating BPF skeleton ${name}.skel.h"
    VERBATIM)
  add_custom_target(${name}_bpf_gen DEPENDS "${skel}")
  add_dependencies(${name}_bpf_gen traceprof_vmlinux_h)
  if(arg_SKEL_TARGET)
    add_library(${arg_SKEL_TARGET} INTERFACE)
    add_dependencies(${arg_SKEL_TARGET} ${name}_bpf_gen)
    target_include_directories(${arg_SKEL_TARGET} INTERFACE "${skel_dir}" "${PROJECT_SOURCE_DIR}")
    target_link_libraries(${arg_SKEL_TARGET} INTERFACE PkgConfig::LIBBPF PkgConfig::LIBELF)
  endif()
endfunction()
