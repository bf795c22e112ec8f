# The SQL API files (sql/api/*.sql: functions and views), in the order of
# sql/api/api.list, as TRACEPROF_API (absolute paths). Every sql/api/*.sql
# must be listed there, and everything listed must exist.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/sql/api/api.list")
file(STRINGS "${PROJECT_SOURCE_DIR}/sql/api/api.list" TRACEPROF_API_NAMES REGEX "^[^#]")
file(GLOB TRACEPROF_API_PRESENT CONFIGURE_DEPENDS RELATIVE "${PROJECT_SOURCE_DIR}/sql/api" "${PROJECT_SOURCE_DIR}/sql/api/*.sql")
set(TRACEPROF_API "")
foreach(n IN LISTS TRACEPROF_API_NAMES)
  if(NOT EXISTS "${PROJECT_SOURCE_DIR}/sql/api/${n}")
    message(FATAL_ERROR "sql/api/api.list names ${n}, which does not exist")
  endif()
  list(APPEND TRACEPROF_API "${PROJECT_SOURCE_DIR}/sql/api/${n}")
endforeach()
foreach(n IN LISTS TRACEPROF_API_PRESENT)
  if(NOT n IN_LIST TRACEPROF_API_NAMES)
    message(FATAL_ERROR "sql/api/${n} is not listed in sql/api/api.list")
  endif()
endforeach()
