// stallscope loader — symbol visibility.
//
// libstallscope_loader is built with hidden visibility: only declarations
// marked STALLSCOPE_LOADER_API — the C++ API of these headers — are
// exported. Everything in the library's src/ stays private to it (white-box
// tests link the static stallscope_loader_internal instead).
//
//   class STALLSCOPE_LOADER_API Sys { … };          // polymorphic: whole class
//   STALLSCOPE_LOADER_API Sys& real_sys() noexcept;  // free function
#pragma once

#define STALLSCOPE_LOADER_API __attribute__((visibility("default")))
