# Turns one text file (a script, a style sheet) into a NUL-terminated C
# array, so that a binary carries it as a string; a header comment that
# opens the file (from its first "/*" to the first "*/" and newline) is
# left out. Invoked by a custom command, e.g. lib/render/CMakeLists.txt:
#   cmake -DIN=file.js -DOUT=file.c -DNAME=symbol [-DHEADER=decl.h] -P embed_text.cmake
# HEADER, when given, is included first so that the compiler checks the
# array against its declaration.
file(READ "${IN}" text)
string(FIND "${text}" "/*" open)
if(open EQUAL 0)
  string(FIND "${text}" "*/\n" close)
  if(close LESS 0)
    message(FATAL_ERROR "${IN}: the header comment does not end")
  endif()
  math(EXPR close "${close} + 3")
  string(SUBSTRING "${text}" ${close} -1 text)
endif()
string(HEX "${text}" hex)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," hex "${hex}")
get_filename_component(from "${IN}" NAME)
set(body "/* Generated from ${from} by cmake/embed_text.cmake: do not edit. */\n")
if(HEADER)
  string(APPEND body "#include \"${HEADER}\"\n")
endif()
string(APPEND body "\nconst char ${NAME}[] = {${hex} 0x00};\n")
file(WRITE "${OUT}.tmp" "${body}")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
