#ifndef SECUREPUSH_CSQLITE_SHIM_H
#define SECUREPUSH_CSQLITE_SHIM_H

#include <sqlite3.h>

/* SQLITE_TRANSIENT is a cast macro Swift cannot import. */
static inline sqlite3_destructor_type sp_sqlite_transient(void) { return SQLITE_TRANSIENT; }

/* sqlite3_config is variadic, which Swift cannot call. Without memory statistics, SQLite's
   allocator takes no process-wide mutex per allocation. Only takes effect before SQLite
   initializes (the first open); later it returns SQLITE_MISUSE and changes nothing. */
static inline int sp_sqlite_disable_memory_statistics(void) { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }

#endif
