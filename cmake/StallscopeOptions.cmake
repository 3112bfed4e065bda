# Warnings and sanitizers applied to every stallscope target.
add_library(stallscope_warnings INTERFACE)
target_compile_options(stallscope_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wpedantic -Wshadow -Wno-missing-field-initializers>)

if(STALLSCOPE_SANITIZE)
  add_compile_options(-fsanitize=${STALLSCOPE_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${STALLSCOPE_SANITIZE})
endif()

# stallscope_own_cxx_runtime(TARGET): links the C++ runtime into TARGET,
# and keeps its symbols inside it. For the libraries loaded into
# programs stallscope did not build (the preload shim and the recorder it
# brings): a NEEDED libstdc++.so.6 there is loaded before the program's own
# libraries, so the system's copy would win over the newer one a conda
# environment ships (found through its RPATH), and the program's extensions
# that need the newer GLIBCXX would then fail to load. Not under
# sanitizers, whose runtimes expect the shared C++ runtime. The whole of
# stallscope_cxx_runtime_compat (internal/src/own_cxx_runtime.cpp) keeps the
# static runtime's glibc needs at the library's own: linked whole, since
# the references it answers come from libstdc++.a, after it on the line.
# libgcc_s stays shared, one unwinder for the process: glibc's thread
# cancellation unwinds with the process's libgcc_s, and a personality
# routine bound to a second, static unwinder aborts on that unwinder's
# context (pthread_cancel of a thread inside an interposed pread;
# tests/preload/test_preload_direct). libgcc_s's ABI is stable and
# versioned: the system's copy serves a program built for a newer one.
function(stallscope_own_cxx_runtime target)
  if(NOT STALLSCOPE_SANITIZE)
    target_link_libraries(${target} PRIVATE
      "$<LINK_LIBRARY:WHOLE_ARCHIVE,stallscope_cxx_runtime_compat>")
    target_link_options(${target} PRIVATE -static-libstdc++ LINKER:--exclude-libs,ALL)
  endif()
endfunction()
