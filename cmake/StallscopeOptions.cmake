# Warnings and sanitizers applied to every stallscope target.
add_library(stallscope_warnings INTERFACE)
target_compile_options(stallscope_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wpedantic -Wshadow -Wno-missing-field-initializers>)

if(STALLSCOPE_SANITIZE)
  add_compile_options(-fsanitize=${STALLSCOPE_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${STALLSCOPE_SANITIZE})
endif()
