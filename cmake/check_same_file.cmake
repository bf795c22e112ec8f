# cmake -DA=FILE -DB=FILE -P check_same_file.cmake: fails (and says which)
# when B is not a byte-equal copy of A. The build runs it for the chart's
# copy of the CRD (lib/spec/CMakeLists.txt).
execute_process(COMMAND "${CMAKE_COMMAND}" -E compare_files "${A}" "${B}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${B} differs from ${A}: the copy must be byte-equal (cp ${A} ${B})")
endif()
